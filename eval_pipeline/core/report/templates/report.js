"use strict";
// A failing or changed test's row opens the test in full (click, Enter or Space).
function toggleRow(row) {
  const detail = row.nextElementSibling;
  const opening = detail.hidden;
  detail.hidden = !opening;
  row.setAttribute("aria-expanded", String(opening));
}
document.querySelectorAll("tr.test-row").forEach(function (row) {
  row.addEventListener("click", function () { toggleRow(row); });
  row.addEventListener("keydown", function (event) {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggleRow(row); }
  });
});
// The model tabs: the since, failures and topics sections show one model at a time.
function showModel(model) {
  document.querySelectorAll("[data-model-block]").forEach(function (block) {
    block.hidden = block.dataset.model !== model;
  });
  document.querySelectorAll(".tabs button").forEach(function (button) {
    button.setAttribute("aria-selected", String(button.dataset.showModel === model));
  });
}
document.querySelectorAll(".tabs button").forEach(function (button) {
  button.addEventListener("click", function () { showModel(button.dataset.showModel); });
});
