// Plotly figures are drawn while the page is still being laid out, so they can measure a wider
// container than the one they end up in (the theme's sidebars arrive later). Resize every figure
// to its final container once the page has loaded.
window.addEventListener("load", function () {
  if (!window.Plotly) return;
  document.querySelectorAll(".plotly-graph-div").forEach(function (div) {
    window.Plotly.Plots.resize(div);
    fitNarrowScreen(div);
  });
});

// On a phone (a figure under 500 px wide), a figure of several panels keeps 560 px and scrolls
// sideways in its output box (course.css): shrunk to the column its panels were a few pixels
// wide. A one-panel figure fits the column. A legend at a figure's side took half its width and
// was cut off at the edge: it goes below the plot, in rows (plotly wraps a horizontal legend).
function fitNarrowScreen(div) {
  var layout = div._fullLayout;
  // a book page's column is 688 px at 1280 px: desktop figures keep their own layout
  if (div.offsetWidth >= 500 || !layout) return;
  if (layout.xaxis2) {
    div.style.minWidth = "560px";
    window.Plotly.Plots.resize(div);
  }
  if (!layout.showlegend || (layout.legend && layout.legend.orientation === "h")) return;
  window.Plotly.relayout(div, {
    "legend.orientation": "h",
    "legend.x": 0,
    "legend.xanchor": "left",
    "legend.y": -0.25,
    "legend.yanchor": "top",
  });
}

// The ipywidgets HTML manager typesets every widget label with the MathJax 2 API
// (MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])), but the book loads MathJax 3, which has
// no Hub: every widget page threw "Cannot read properties of undefined (reading 'Queue')", and TeX
// in a label would stay raw. Give MathJax 3 that one call. MathJax 3 takes any MathJax object that
// exists before it loads as its configuration, so the shim waits for DOMContentLoaded: that comes
// after the deferred MathJax script has run and before the widgets render (on load).
document.addEventListener("DOMContentLoaded", function () {
  var mathjax = window.MathJax;
  if (!mathjax || !mathjax.startup || mathjax.Hub) return;
  mathjax.Hub = {
    Queue: function () {
      Array.prototype.forEach.call(arguments, function (job) {
        if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
          // chained on startup.promise, as MathJax 3 asks, so typesetting calls never overlap
          mathjax.startup.promise = mathjax.startup.promise.then(function () {
            return mathjax.typesetPromise([job[2]]);
          });
        }
      });
    },
  };
});

// The download buttons link to the page's source in _sources/ (the .ipynb of a chapter). A server
// that sends .ipynb files as JSON made the browser show them as text in a new tab; the download
// attribute asks it to save the file instead. The theme's button template takes no attributes.
document.addEventListener("DOMContentLoaded", function () {
  document
    .querySelectorAll("a.btn-download-source-button, a.btn-download-notebook-button")
    .forEach(function (link) {
      link.setAttribute("download", "");
    });
});
