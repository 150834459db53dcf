// Evaluated in each page by tests/test_website.py once MathJax and mermaid are done: what a reader would see.
async () => {
  const article = document.querySelector(".bd-article") || document.body;
  const short = (text) => (text || "").replace(/\s+/g, " ").trim().slice(0, 80);

  // Formulas: every .math node holds MathJax output, no TeX error, no delimiter left as text.
  const math = [...document.querySelectorAll(".math")].map((node) => ({
    typeset: node.querySelector("mjx-container") !== null,
    error: node.querySelector("mjx-merror") !== null,
    raw: /\\\(|\\\[|\$\$/.test([...node.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE)
      .map((n) => n.textContent).join("")),
    text: short(node.getAttribute("data-latex") || node.textContent),
  }));

  // Diagrams: an SVG, its size on the page, and the size its smallest label is drawn at.
  const diagrams = [...document.querySelectorAll("pre.mermaid")].map((pre) => {
    const svg = pre.querySelector(":scope > svg");
    if (!svg) return { svg: false, source: short(pre.textContent) };
    const box = svg.getBoundingClientRect();
    const natural = svg.viewBox.baseVal ? svg.viewBox.baseVal.width : 0;
    const scale = natural > 0 ? box.width / natural : 1;
    const sizes = [...svg.querySelectorAll(".nodeLabel, .edgeLabel, text")]
      .filter((el) => el.textContent.trim() !== "")
      .map((el) => parseFloat(getComputedStyle(el).fontSize));
    const scrolls = ["auto", "scroll"].includes(getComputedStyle(pre).overflowX);
    return {
      svg: true, width: box.width, height: box.height, scale,
      text_px: sizes.length ? Math.min(...sizes) * scale : null,
      fits: pre.scrollWidth <= pre.clientWidth + 1 || scrolls,
      source: short(pre.textContent),
    };
  });

  // Images (plots, badges, logos): loaded, not broken.
  const images = [...document.images].map((img) => ({
    src: img.getAttribute("src"), loaded: img.complete && img.naturalWidth > 0,
  }));

  const colab = [...document.querySelectorAll('a[href*="colab.research.google.com"]')].map((a) => a.href);

  // Sideways scrolling: the page must fit the window; name what sticks out of it (outside any scrolling box).
  const sticksOut = [];
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    const clipped = (el) => {
      for (let p = el.parentElement; p; p = p.parentElement) {
        if (["auto", "scroll", "hidden", "clip"].includes(getComputedStyle(p).overflowX)) return true;
      }
      return false;
    };
    for (const el of article.querySelectorAll("*")) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > window.innerWidth + 1 && !clipped(el)) {
        sticksOut.push(`${el.tagName.toLowerCase()}.${String(el.className.baseVal ?? el.className).split(" ")[0]}: `
                       + `${short(el.textContent)}`);
        if (sticksOut.length >= 5) break;
      }
    }
  }

  const summary = document.querySelector("table.attnbook-summary");
  const cell = summary && summary.querySelector("td");
  return {
    math, diagrams, images, colab,
    page_width: document.documentElement.scrollWidth, window_width: window.innerWidth, sticks_out: sticksOut,
    summary_styled: summary ? getComputedStyle(summary).borderCollapse === "collapse"
                              && parseFloat(getComputedStyle(cell).paddingLeft) >= 4 : null,
  };
}
