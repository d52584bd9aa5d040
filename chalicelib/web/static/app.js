// The web view's only script (same origin; the Content-Security-Policy allows no other):
// it reveals the "Copy the resume block" button and copies the block's text. Pages work
// without it: the block is on the page, in a <details> element, to select by hand.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    var status = button.parentNode.querySelector(".copied");
    if (!source) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var done = function (message) { if (status) status.textContent = message; };
      var fallback = function () {
        // No Clipboard API (plain http on another host): select the text for Ctrl-C.
        var details = source.closest("details");
        if (details) details.open = true;
        var range = document.createRange();
        range.selectNodeContents(source);
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        done("Selected: press Ctrl-C (⌘-C) to copy.");
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.textContent).then(
          function () { done("Copied."); }, fallback);
      } else {
        fallback();
      }
    });
  });
});
