// Evaluated by tests/test_website.py with "light" or "dark": switch the page to that theme and measure the WCAG
// contrast ratio of the check lines and the summary table (text and coloured statuses) against what lies behind.
(theme) => {
  const rgba = (css) => (css.match(/[\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const ratio = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const still = document.createElement("style");  // no colour transitions: measure the final colours
  still.textContent = "*, *::before, *::after { transition: none !important; }";
  document.head.appendChild(still);
  document.documentElement.dataset.theme = theme;
  const selector = ".attnbook-check, .attnbook-check b, table.attnbook-summary caption, table.attnbook-summary td";
  return [...document.querySelectorAll(selector)].map((el) => ({
    text: el.textContent.trim().slice(0, 60),
    ratio: ratio(rgba(getComputedStyle(el).color).slice(0, 3), background(el)),
  }));
}
