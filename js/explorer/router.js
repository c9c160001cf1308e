// Client-side routing: the notary serves the same shell for every explorer path; this module
// picks the page, and turns clicks on /explorer/ links into history entries without a reload.

let renderer = null;

export function setRenderer(fn) {
  renderer = fn;
}

/** Go to an explorer path (pushState, or replaceState with `replace`), then render it. */
export function navigate(path, { replace = false, state = null } = {}) {
  if (replace) history.replaceState(state, "", path);
  else history.pushState(state, "", path);
  renderer?.();
}

/** Send same-origin /explorer/ link clicks through the router (keeps modified clicks native). */
export function interceptLinks(root) {
  root.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = e.target instanceof Element ? e.target.closest("a[href]") : null;
    if (a === null || a.target || a.hasAttribute("download")) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || !url.pathname.startsWith("/explorer/")) return;
    e.preventDefault();
    navigate(url.pathname + url.search);
  });
  addEventListener("popstate", () => renderer?.());
}

/** [pattern, page] pairs; the first match wins, groups are decoded and passed on. */
export function match(routes, pathname) {
  for (const [pattern, page, names = []] of routes) {
    const m = pattern.exec(pathname);
    if (m === null) continue;
    const args = {};
    names.forEach((n, i) => {
      try {
        args[n] = decodeURIComponent(m[i + 1]);
      } catch {
        args[n] = m[i + 1];
      }
    });
    return { page, args };
  }
  return null;
}
