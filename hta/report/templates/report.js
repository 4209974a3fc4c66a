(function () {
  "use strict";
  // Text packed by hta/report/packing.py: 7 bits a character, then raw DEFLATE.
  var AWKWARD = [0x00, 0x0D, 0x3C];
  function unpack(el) {
    var size = el.getAttribute("data-deflated");
    if (!size) {
      return Promise.resolve(el.textContent);
    }
    var text = el.textContent, out = new Uint8Array(+size), acc = 0, nbits = 0, n = 0;
    function put(v) {
      acc = ((acc << 7) | v) & 0x3fff;
      nbits += 7;
      if (nbits >= 8 && n < out.length) {
        nbits -= 8;
        out[n++] = (acc >> nbits) & 0xff;
      }
    }
    for (var i = 0; i < text.length; i++) {
      var c = text.charCodeAt(i);
      if (c < 0x80) { put(c); }
      else if (c >= 0x300) { put(AWKWARD[c - 0x300]); }
      else { put(AWKWARD[(c - 0x100) >> 7]); put((c - 0x100) & 127); }
    }
    var stream = new Blob([out]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
    return new Response(stream).text();
  }
  function loadPlotly() {
    var el = document.getElementById("hta-plotly");
    if (!el) {
      return Promise.resolve();  // inline or from the CDN: already run
    }
    return unpack(el).then(function (js) {
      var script = document.createElement("script");
      script.text = js;
      document.head.appendChild(script);  // runs now, defining window.Plotly
    });
  }
  function openSections() {
    var el = document.getElementById("hta-sections");
    if (!el) {
      return Promise.resolve();  // written as plain HTML
    }
    return unpack(el).then(function (html) {
      var here = document.getElementById("hta-sections-here");
      here.insertAdjacentHTML("beforebegin", html);  // the page's own escaped markup
      here.remove();
      var target = location.hash && document.getElementById(location.hash.slice(1));
      if (target) {
        target.scrollIntoView();  // a link to a packed section: it exists only now
      }
    });
  }
  function draw(doc) {
    var config = {responsive: true, displaylogo: false};
    document.querySelectorAll("div[data-figure]").forEach(function (div) {
      var fig = doc.figures[div.getAttribute("data-figure")];
      if (fig) {
        var layout = fig.layout || {};
        var template = doc.template_of[div.getAttribute("data-figure")];
        if (template !== undefined) {
          layout.template = doc.templates[template];  // written once for every figure
        }
        if (!layout.height) {
          layout.height = 450;  // plotly's default; the div alone would give min-height
        }
        // The div keeps the figure's height: on a resize (a window made wider, a
        // full-page screenshot) a responsive plot forgets layout.height and takes the
        // div's, which would be its min-height, the drawing then running over what follows.
        div.style.height = layout.height + "px";
        Plotly.newPlot(div, fig.data || [], layout, config);
      }
    });
  }
  var opened = openSections();
  opened.then(followSections).catch(function (err) {
    console.error("hta report: the sections could not be opened: " + err);
  });
  Promise.all([unpack(document.getElementById("hta-figures")), loadPlotly(), opened])
    .then(function (done) { draw(JSON.parse(done[0])); })
    .catch(function (err) {
      console.error("hta report: the figures could not be drawn: " + err);
    });
  // highlight the section in view in the table of contents
  function followSections() {
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
  }
})();
