// The explorer's entry point: layout, routes, and a render per navigation.

import { alert, h, link } from "./dom.js";
import { interceptLinks, match, setRenderer } from "./router.js";
import { overview } from "./views/overview.js";
import { searchPage } from "./views/search.js";
import { entryPage, receiptPage } from "./views/receipt.js";
import { verifyPage } from "./views/verify.js";
import { trustPage } from "./views/trust.js";

const ROUTES = [
  [/^\/explorer\/?$/, (main) => overview(main)],
  [/^\/explorer\/search$/, (main, a) => searchPage(main, a)],
  [/^\/explorer\/servers\/([^/]+)$/, (main, a) => searchPage(main, a), ["server"]],
  [/^\/explorer\/tool-calls\/([^/]+)$/, (main, a) => receiptPage(main, a), ["id"]],
  [/^\/explorer\/entries\/([^/]+)$/, (main, a) => entryPage(main, a), ["index"]],
  [/^\/explorer\/verify$/, (main) => verifyPage(main)],
  [/^\/explorer\/trust$/, (main) => trustPage(main)],
];

let generation = 0;

function markCurrent(nav) {
  for (const a of nav.querySelectorAll("a")) {
    const here = new URL(a.href).pathname === location.pathname;
    if (here) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function render() {
  const mine = ++generation;
  const main = document.getElementById("main");
  const next = h("div", { class: "page" });
  const found = match(ROUTES, location.pathname);
  markCurrent(document.getElementById("nav"));
  let title = null;
  const stale = () => mine !== generation;
  main.replaceChildren(h("p", { class: "loading", "aria-busy": "true" }, "Loading…"));
  try {
    if (found === null) {
      next.append(h("h1", { tabindex: "-1" }, "Not found"), h("p", {}, "No explorer page at this address. ", link("/explorer/", "Go to the overview")));
      title = "Not found";
    } else {
      title = await found.page(next, { ...found.args, params: new URLSearchParams(location.search), state: history.state });
      if (title === null) return; // the page navigated elsewhere
    }
  } catch (e) {
    if (stale()) return;
    if (!next.querySelector("h1")) next.prepend(h("h1", { tabindex: "-1" }, e.status === 404 ? "Not found" : "Something went wrong"));
    next.append(alert(e.message));
    title = "Error";
  }
  if (stale()) return;
  main.replaceChildren(next);
  document.title = `${title} · MCP notary explorer`;
  const heading = main.querySelector("h1");
  if (heading && mine > 1) heading.focus(); // keyboard and screen-reader users land on the new page
}

setRenderer(render);
interceptLinks(document);
render();
