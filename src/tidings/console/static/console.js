// tidings console: an opt-in auto-refresh, remembered per browser. Pages are
// server-rendered; nothing else here needs script.
(function () {
  "use strict";
  var box = document.getElementById("auto-refresh");
  if (!box) { return; }
  var KEY = "tidings-console-auto-refresh";
  var SECONDS = 30;
  var timer = null;
  function arm() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (box.checked) { timer = setTimeout(function () { location.reload(); }, SECONDS * 1000); }
  }
  try { box.checked = localStorage.getItem(KEY) === "1"; } catch (e) { /* storage disabled */ }
  box.addEventListener("change", function () {
    try { localStorage.setItem(KEY, box.checked ? "1" : "0"); } catch (e) { /* ignore */ }
    arm();
  });
  arm();
}());
