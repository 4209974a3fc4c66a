(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("hta-figures").textContent);
  var config = {responsive: true, displaylogo: false};
  document.querySelectorAll("div[data-figure]").forEach(function (div) {
    var fig = figures[div.getAttribute("data-figure")];
    if (fig) {
      var layout = fig.layout || {};
      if (!layout.height) {
        layout.height = 450;  // plotly's default; the div alone would give min-height
      }
      Plotly.newPlot(div, fig.data || [], layout, config);
    }
  });
  // highlight the section in view in the table of contents
  var links = {};
  document.querySelectorAll("nav#toc a").forEach(function (a) {
    links[a.getAttribute("href").slice(1)] = a;
  });
  if ("IntersectionObserver" in window) {
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting && links[e.target.id]) {
          Object.keys(links).forEach(function (k) { links[k].classList.remove("active"); });
          links[e.target.id].classList.add("active");
        }
      });
    }, {rootMargin: "0px 0px -70% 0px"});
    document.querySelectorAll("main > header, main > section").forEach(function (el) {
      observer.observe(el);
    });
  }
})();
