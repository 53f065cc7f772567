/* The HTML report's script: sortable tables, tabs, and the transcript viewer.
 *
 * Everything it shows is in the page (<script id="arena-data">, JSON); nothing is fetched.
 * URL parameters select what is shown first: tab=tables|viewer, match=ID, market=K,
 * turn=T (0: before the first message), sort=TABLE_ID:COLUMN[:desc]. */
(function () {
  "use strict";

  var errors = [];
  function report(text) {
    errors.push(String(text));
    var box = document.getElementById("errors");
    if (box) { box.textContent = errors.join("\n"); box.classList.remove("hidden"); }
  }
  window.addEventListener("error", function (e) { report("error: " + e.message); });
  var consoleError = console.error;
  console.error = function () {
    report("console.error: " + Array.prototype.join.call(arguments, " "));
    consoleError.apply(console, arguments);
  };

  var DATA = JSON.parse(document.getElementById("arena-data").textContent);
  var params = new URLSearchParams(window.location.search);

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function fmt(x, digits) {
    if (x === null || x === undefined || !isFinite(x)) return "-";
    return Number(x).toFixed(digits === undefined ? 2 : digits);
  }
  function table(headers, rows, cls) {
    var head = el("tr", {}, headers.map(function (h) { return el("th", {text: h}); }));
    var body = rows.map(function (r) {
      return el("tr", {}, r.map(function (c) {
        return c instanceof Node ? el("td", {}, [c]) : el("td", {text: String(c)});
      }));
    });
    return el("table", {cls: cls || ""}, [el("thead", {}, [head]), el("tbody", {}, body)]);
  }

  /* ------------------------------------------------------------ sortable tables */
  function sortKey(text) {
    var m = /^\s*(-?\d+(?:\.\d+)?)/.exec(text);
    return m ? {num: true, v: parseFloat(m[1])} : {num: false, v: text.toLowerCase()};
  }
  function sortTable(tbl, col, descending) {
    var body = tbl.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.forEach(function (r, i) { r.dataset.order = r.dataset.order || String(i); });
    rows.sort(function (a, b) {
      var x = sortKey(a.cells[col].textContent), y = sortKey(b.cells[col].textContent);
      var c;
      if (x.num && y.num) c = x.v - y.v;
      else if (x.num !== y.num) c = x.num ? -1 : 1;
      else c = x.v < y.v ? -1 : x.v > y.v ? 1 : 0;
      if (c === 0) c = Number(a.dataset.order) - Number(b.dataset.order);
      return descending ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(tbl.tHead.rows[0].cells, function (th, i) {
      if (i === col) th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    });
  }
  function initSortable() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (tbl) {
      Array.prototype.forEach.call(tbl.tHead.rows[0].cells, function (th, i) {
        th.addEventListener("click", function () {
          sortTable(tbl, i, th.getAttribute("aria-sort") === "ascending");
        });
      });
    });
    var want = params.get("sort");
    if (want) {
      var parts = want.split(":");
      var tbl = document.getElementById(parts[0]);
      var col = parseInt(parts[1] || "0", 10);
      // A link's column may be one the table lacks (an edited or an old link): ignored.
      if (tbl && tbl.tHead && col >= 0 && col < tbl.tHead.rows[0].cells.length) {
        sortTable(tbl, col, parts[2] === "desc");
      }
    }
  }

  /* ------------------------------------------------------------ tabs */
  function showTab(name) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-tab]"), function (b) {
      var on = b.dataset.tab === name;
      b.classList.toggle("active", on);
      var pane = document.getElementById("tab-" + b.dataset.tab);
      if (pane) pane.classList.toggle("hidden", !on);
    });
    setParam("tab", name);  // a reload or a shared link opens the tab shown
  }
  function setParam(key, value) {
    if (!(window.history && window.history.replaceState)) return;
    var q = new URLSearchParams(window.location.search);
    q.set(key, value);
    try { window.history.replaceState(null, "", "?" + q.toString()); } catch (e) { /* file:// in some browsers */ }
  }
  function initTabs() {
    var buttons = document.querySelectorAll("[data-tab]");
    Array.prototype.forEach.call(buttons, function (b) {
      b.addEventListener("click", function () { showTab(b.dataset.tab); });
    });
    if (buttons.length) showTab(params.get("tab") || buttons[0].dataset.tab);
  }

  /* ------------------------------------------------------------ transcript viewer */
  var V = DATA.viewer;
  var state = {match: null, market: null, turn: 0};

  function current() { return V && state.match ? V.markets[state.match + "#" + state.market] : null; }

  function offerText(msg) {
    if (!msg || !msg.offer) return "no offer";
    return "product " + msg.offer.product + " at " + fmt(msg.offer.price);
  }
  function sellerLine(rec) {
    var msg = rec.seller_message;
    if (!msg) return "an unparsable message";
    return "to buyer " + msg.to + ": " + offerText(msg);
  }
  function buyerLine(rec) {
    var msg = rec.buyer_message;
    if (!msg) return "an unparsable answer";
    var d = msg.decision;
    return d === "counter" ? "counter: " + offerText(msg) : d;
  }
  function badge(violation, error) {
    if (violation === "ok") return null;
    return el("span", {cls: "badge bad", text: violation + (error && error !== violation ? ": " + error : "")});
  }

  function turnBlock(rec, isCurrent) {
    var head = el("h3", {}, [
      el("span", {text: "Turn " + rec.turn}),
      rec.trade ? el("span", {cls: "badge trade", text: "trade"}) : null,
    ]);
    var seller = el("div", {cls: "msg seller"}, [
      el("span", {cls: "who", text: "Seller "}), el("span", {cls: "line", text: sellerLine(rec)}), " ",
      badge(rec.seller_violation, rec.seller_error), el("pre", {text: rec.seller_text}),
    ]);
    var parts = [head, seller];
    if (rec.buyer >= 0) {
      parts.push(el("div", {cls: "msg buyer"}, [
        el("span", {cls: "who", text: "Buyer " + rec.buyer + " "}), el("span", {cls: "line", text: buyerLine(rec)}), " ",
        badge(rec.buyer_violation, rec.buyer_error), el("pre", {text: rec.buyer_text}),
      ]));
    }
    if (rec.trade) {
      parts.push(el("div", {cls: "outcome", text: "Buyer " + rec.trade.buyer + " buys product " +
        rec.trade.product + " at " + fmt(rec.trade.price)}));
    }
    if (rec.buyer_left) parts.push(el("div", {cls: "outcome left", text: "Buyer " + rec.buyer + " leaves"}));
    return el("div", {cls: "turn" + (isCurrent ? " current" : ""), "data-turn": String(rec.turn)}, parts);
  }

  function initialState(o) {
    var n = o.buyers;
    var none = [];
    for (var i = 0; i < n; i++) none.push(null);
    return {bids: none, stock: o.inventory.slice(), bought: none.map(function () { return -1; }),
            left: none.map(function () { return false; }), profit: 0, buyer_surplus: 0, trades: []};
  }

  function statePanel(m, o) {
    var st = state.turn > 0 ? m.states[state.turn - 1] : initialState(o);
    var panel = el("div", {cls: "panel", id: "viewer-state"});
    var wstar = o.w_star;
    var welfare = st.profit + st.buyer_surplus;
    panel.appendChild(el("h4", {text: state.turn === 0 ? "Before the first message" :
      "After turn " + state.turn + (state.turn === m.turns.length ? " (the end)" : "")}));
    panel.appendChild(table(["", "so far", "oracle"], [
      ["seller profit", fmt(st.profit), "W*_T " + fmt(wstar)],
      ["buyer surplus", fmt(st.buyer_surplus), ""],
      ["welfare", fmt(welfare), "efficiency " + (wstar > 0 ? fmt(welfare / wstar, 3) : "-")],
      ["capture", wstar > 0 ? fmt(st.profit / wstar, 3) : "-", ""],
      ["highest Walrasian profit", "", fmt(o.walrasian_high)],
      ["VCG profit (= lowest Walrasian)", "", fmt(o.vcg)],
    ], "kv"));
    var bids = [];
    st.bids.forEach(function (b, i) { if (b) bids.push([String(i), String(b[0]), fmt(b[1])]); });
    panel.appendChild(el("h4", {text: "Standing bids"}));
    panel.appendChild(bids.length ? table(["buyer", "product", "bid"], bids) : el("p", {cls: "note", text: "none"}));
    panel.appendChild(el("h4", {text: "Trades"}));
    panel.appendChild(st.trades.length ? table(["turn", "buyer", "product", "price", "value", "margin", "buyer surplus"],
      st.trades.map(function (t) {
        var v = o.values[t[0]][t[1]];
        return [String(t[3]), String(t[0]), String(t[1]), fmt(t[2]), fmt(v), fmt(t[2] - o.costs[t[1]]), fmt(v - t[2])];
      })) : el("p", {cls: "note", text: "none yet"}));
    panel.appendChild(el("h4", {text: "Stock"}));
    panel.appendChild(table(["product"].concat(o.costs.map(function (_, j) { return String(j); })), [
      ["cost"].concat(o.costs.map(function (c) { return fmt(c); })),
      ["in stock"].concat(st.stock.map(function (k, j) { return k + " of " + o.inventory[j]; })),
    ]));
    panel.appendChild(el("h4", {text: "Oracle: one optimal assignment within T = " + o.turns + " trades"}));
    panel.appendChild(table(["buyer", "product", "value", "cost", "surplus", "by now"],
      o.assignment.map(function (a) {
        var got = st.bought[a.buyer];
        var now = got === a.product ? "bought it" : got >= 0 ? "bought product " + got :
          st.left[a.buyer] ? "left" : "-";
        return [String(a.buyer), String(a.product), fmt(a.value), fmt(a.cost), fmt(a.surplus), now];
      })));
    panel.appendChild(el("h4", {text: "Private values (outlined: the oracle's pairs; filled: trades so far)"}));
    var opt = {};
    o.assignment.forEach(function (a) { opt[a.buyer + ":" + a.product] = true; });
    var traded = {};
    st.trades.forEach(function (t) { traded[t[0] + ":" + t[1]] = true; });
    var head = el("tr", {}, [el("th", {text: "buyer"})].concat(o.costs.map(function (_, j) {
      return el("th", {cls: "num", text: "product " + j});
    })));
    var rows = o.values.map(function (row, i) {
      return el("tr", {}, [el("td", {text: String(i) + (st.left[i] ? " (left)" : "")})].concat(row.map(function (v, j) {
        var cls = "num" + (opt[i + ":" + j] ? " opt" : "") + (traded[i + ":" + j] ? " traded" : "");
        return el("td", {cls: cls, text: fmt(v)});
      })));
    });
    panel.appendChild(el("table", {}, [el("thead", {}, [head]), el("tbody", {}, rows)]));
    return panel;
  }

  function render() {
    var root = document.getElementById("viewer");
    if (!root) return;
    var m = current();
    var body = document.getElementById("viewer-body");
    body.innerHTML = "";
    if (!m) { body.appendChild(el("p", {cls: "note", text: "No transcript kept in this run."})); return; }
    var o = V.oracle[m.oracle];
    var n = m.turns.length;
    state.turn = Math.max(0, Math.min(state.turn, n));
    root.dataset.match = state.match;
    root.dataset.market = String(state.market);
    root.dataset.turn = String(state.turn);
    document.getElementById("viewer-position").textContent = "turn " + state.turn + " of " + n;
    var turns = el("div", {cls: "turns", id: "viewer-turns"});
    for (var t = 0; t < state.turn; t++) turns.appendChild(turnBlock(m.turns[t], t === state.turn - 1));
    if (state.turn === 0) turns.appendChild(el("p", {cls: "note", text: "Step forward to see the first message."}));
    if (!m.replayed) turns.appendChild(el("p", {cls: "note", text: "Note: replaying these messages did not reproduce every recorded outcome."}));
    body.appendChild(el("div", {cls: "viewer-grid"}, [turns, statePanel(m, o)]));
    // Keep the current turn in view by scrolling the list only (not the page).
    var last = turns.querySelector(".turn.current");
    if (last) turns.scrollTop = Math.max(0, last.offsetTop + last.offsetHeight - turns.clientHeight);
    if (window.history && window.history.replaceState) {
      var q = new URLSearchParams(window.location.search);
      q.set("match", state.match); q.set("market", String(state.market)); q.set("turn", String(state.turn));
      try { window.history.replaceState(null, "", "?" + q.toString()); } catch (e) { /* file:// in some browsers */ }
    }
  }

  function fillMarkets() {
    var sel = document.getElementById("viewer-market");
    sel.innerHTML = "";
    var match = V.matches.filter(function (x) { return x.id === state.match; })[0];
    (match ? match.markets : []).forEach(function (k) {
      sel.appendChild(el("option", {value: String(k), text: "market " + k}));
    });
    if (match && match.markets.indexOf(state.market) < 0) state.market = match.markets[0];
    sel.value = String(state.market);
  }

  function fillMatches(filter) {
    var sel = document.getElementById("viewer-match");
    sel.innerHTML = "";
    var f = (filter || "").toLowerCase();
    V.matches.forEach(function (x) {
      if (f && x.id.toLowerCase().indexOf(f) < 0) return;
      sel.appendChild(el("option", {value: x.id, text: x.seller + " vs " + x.buyer + " | " + x.rule + " | " + x.config}));
    });
    if (state.match && sel.querySelector('option[value="' + CSS.escape(state.match) + '"]')) sel.value = state.match;
  }

  function initViewer() {
    var root = document.getElementById("viewer");
    if (!root || !V) return;
    var first = V.matches[0];
    state.match = params.get("match") || (first ? first.id : null);
    if (!V.matches.some(function (x) { return x.id === state.match; })) state.match = first ? first.id : null;
    state.market = params.has("market") ? Number(params.get("market")) : null;
    state.turn = params.has("turn") ? parseInt(params.get("turn"), 10) : 0;
    if (!isFinite(state.turn)) state.turn = 0;  // "?turn=abc": the first turn, not NaN
    var matchSel = el("select", {id: "viewer-match", "aria-label": "match"});
    var filter = el("input", {id: "viewer-filter", type: "search", placeholder: "filter matches", "aria-label": "filter matches"});
    var marketSel = el("select", {id: "viewer-market", "aria-label": "market"});
    function button(label, title, fn) {
      var b = el("button", {type: "button", title: title, text: label});
      b.addEventListener("click", fn);
      return b;
    }
    var m = function () { return current(); };
    var controls = el("div", {cls: "viewer-controls"}, [
      el("label", {}, ["Match ", matchSel]), filter, el("label", {}, ["Market ", marketSel]),
      button("|<", "first (Home)", function () { state.turn = 0; render(); }),
      button("<", "previous turn (left arrow)", function () { state.turn -= 1; render(); }),
      button(">", "next turn (right arrow)", function () { state.turn += 1; render(); }),
      button(">|", "last (End)", function () { state.turn = m() ? m().turns.length : 0; render(); }),
      el("span", {id: "viewer-position"}),
    ]);
    root.appendChild(controls);
    root.appendChild(el("div", {id: "viewer-body"}));
    fillMatches("");
    fillMarkets();
    matchSel.addEventListener("change", function () { state.match = matchSel.value; state.market = null; state.turn = 0; fillMarkets(); render(); });
    marketSel.addEventListener("change", function () { state.market = Number(marketSel.value); state.turn = 0; render(); });
    filter.addEventListener("input", function () {
      fillMatches(filter.value);
      if (matchSel.value && matchSel.value !== state.match) { state.match = matchSel.value; state.market = null; state.turn = 0; fillMarkets(); render(); }
    });
    document.addEventListener("keydown", function (e) {
      if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "SELECT")) return;
      var pane = document.getElementById("tab-viewer");
      if (pane && pane.classList.contains("hidden")) return;
      if (e.key === "ArrowRight") state.turn += 1;
      else if (e.key === "ArrowLeft") state.turn -= 1;
      else if (e.key === "Home") state.turn = 0;
      else if (e.key === "End") state.turn = m() ? m().turns.length : 0;
      else return;
      e.preventDefault();
      render();
    });
    render();
  }

  // Each part on its own: one that fails (a bad link parameter, say) leaves the others.
  [initSortable, initTabs, initViewer].forEach(function (init) {
    try {
      init();
    } catch (e) {
      report("error: " + (e && e.stack ? e.stack : e));
    }
  });
  document.body.dataset.ready = "1";
})();
