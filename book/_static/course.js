// Plotly figures are drawn while the page is still being laid out, so they can measure a wider
// container than the one they end up in (the theme's sidebars arrive later). Resize every figure
// to its final container once the page has loaded.
window.addEventListener("load", function () {
  if (!window.Plotly) return;
  document.querySelectorAll(".plotly-graph-div").forEach(function (div) {
    window.Plotly.Plots.resize(div);
  });
});
