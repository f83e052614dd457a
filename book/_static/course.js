// Small fixes to the theme's widgets, applied once the page has loaded. The accessibility fixes each
// answer a rule of the axe-core audit that the browser tests run on every page.
(function () {
  "use strict";

  function fix() {
    // Buttons whose aria-label hides their visible text ("Search Ctrl+K" labelled just "Search"):
    // let the visible text be the accessible name (WCAG 2.5.3, label in name).
    document.querySelectorAll("button.search-button-field[aria-label]").forEach(function (button) {
      button.removeAttribute("aria-label");
    });
    // Icons inside a labelled button are decoration: their tooltips must not compete with its label.
    // (Font Awesome turns an icon's title into an SVG <title>, possibly after this script has run,
    // hence the observer below.)
    document.querySelectorAll("button[aria-label]").forEach(function (button) {
      button.querySelectorAll("[title]").forEach(function (icon) { icon.removeAttribute("title"); });
      button.querySelectorAll("svg title").forEach(function (title) { title.remove(); });
      button.querySelectorAll("i, svg").forEach(function (icon) {
        icon.setAttribute("aria-hidden", "true");
        icon.removeAttribute("aria-labelledby");
      });
    });
    // Code and output blocks scroll sideways when their lines are long (always, on a phone): keyboard
    // users must be able to focus them to scroll (WCAG 2.1.1, axe's scrollable-region-focusable).
    document.querySelectorAll("div.highlight pre, div.cell_output pre").forEach(function (block) {
      if (!block.hasAttribute("tabindex")) block.setAttribute("tabindex", "0");
    });
    // jupyterquiz writes a numeric question's label next to its input without linking the two.
    document.querySelectorAll(".Quiz label.InpLabel").forEach(function (label) {
      var input = label.nextElementSibling;
      if (!input || input.tagName !== "INPUT" || label.htmlFor) return;
      label.htmlFor = input.id;
      var question = label.closest(".Quiz").querySelector("[id^='quizQn']");
      if (question) input.setAttribute("aria-describedby", question.id);
    });
    // The sidebar's expand/collapse toggles are <summary> elements with only an icon: name them.
    document.querySelectorAll(".bd-sidebar summary").forEach(function (summary) {
      if (summary.textContent.trim() || summary.hasAttribute("aria-label")) return;
      var link = summary.closest("li") && summary.closest("li").querySelector(":scope > a");
      summary.setAttribute("aria-label", "Show the pages of " + (link ? link.textContent.trim() : "this section"));
    });
  }

  // The theme's download menu opens files in a new tab, where a browser shows a notebook as raw JSON:
  // ask for a download instead (the file keeps its name).
  function downloadLinks() {
    document.querySelectorAll(".dropdown-download-buttons a.dropdown-item[href]").forEach(function (link) {
      link.setAttribute("download", "");
      link.removeAttribute("target");
    });
  }

  function start() {
    downloadLinks();
    fix();
    var pending = false;
    new MutationObserver(function () {
      if (pending) return;
      pending = true;
      window.requestAnimationFrame(function () { pending = false; fix(); });
    }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["title"] });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
