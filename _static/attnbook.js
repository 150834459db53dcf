// attnbook's website (Jupyter Book includes every .js in _static/): draw each mermaid diagram between 0.7 and 1
// times its natural size. sphinxcontrib-mermaid stretches diagrams to the column width, which blows small ones up
// and shrinks wide ones below legible text; what stays wider than the column scrolls in its box (attnbook.css).
document.addEventListener("DOMContentLoaded", () => {
  const MIN_SCALE = 0.7;
  const bound = (pre) => {
    const svg = pre.querySelector(":scope > svg");
    const natural = svg && svg.viewBox.baseVal ? svg.viewBox.baseVal.width : 0;
    if (natural > 0) {
      svg.style.setProperty("max-width", `${natural}px`, "important");
      svg.style.setProperty("min-width", `${MIN_SCALE * natural}px`, "important");
    }
  };
  for (const pre of document.querySelectorAll("pre.mermaid")) {
    new MutationObserver(() => bound(pre)).observe(pre, { childList: true });
  }
});
