// Injected at the end of each SVG by scripts/svg-screenshots.sh. After the SVG's own script has
// run (inferno's sets the width and cuts the frame labels), it measures every visible text's box
// in the window and writes them as JSON into a desc element, id bbox-report, which chromium's
// --dump-dom prints.
window.addEventListener("load", function () {
  setTimeout(function () {
    var root = document.documentElement;
    var whole = root.getBoundingClientRect();
    var boxes = [];
    var texts = root.getElementsByTagName("text");
    for (var i = 0; i < texts.length; i++) {
      var text = texts[i];
      var box = text.getBoundingClientRect();
      if (!text.textContent.trim() || box.width === 0) continue;
      var frame = null;
      var parent = text.parentNode;
      if (parent && parent.tagName === "g") {
        var rects = parent.getElementsByTagName("rect");
        if (rects.length === 1) {
          var r = rects[0].getBoundingClientRect();
          frame = [r.left, r.right];
        }
      }
      boxes.push({ id: text.id || "", text: text.textContent, left: box.left, right: box.right,
                   top: box.top, bottom: box.bottom, frame: frame });
    }
    var report = document.createElementNS("http://www.w3.org/2000/svg", "desc");
    report.setAttribute("id", "bbox-report");
    report.textContent = JSON.stringify({ width: whole.width, height: whole.height, texts: boxes });
    root.appendChild(report);
  }, 300);
});
