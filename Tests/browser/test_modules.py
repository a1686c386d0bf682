"""The web client's ES modules (no build step): index.html preloads exactly the modules the
dashboard loads, so a new module cannot be forgotten, and every module the widget loads is served
so that a page of another origin may import it."""

import urllib.request
from html.parser import HTMLParser

from harness import PUBLIC, module_graph


class Preloads(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "link" and a.get("rel") == "modulepreload":
            self.hrefs.append(a["href"])


def test_index_preloads_every_module_the_dashboard_loads_and_no_other(page, server):
    parser = Preloads()
    parser.feed((PUBLIC / "index.html").read_text())
    preloads = parser.hrefs
    assert len(preloads) == len(set(preloads)), f"preloaded twice: {preloads}"
    graph = set(module_graph("js/app.js")) - {"js/app.js"}
    assert set(preloads) == graph, (
        f"index.html should preload {sorted(graph - set(preloads))} and not {sorted(set(preloads) - graph)}")

    # What the browser fetched, with its cache off: each module once (a preload that the import did
    # not take up would be fetched twice), and nothing beyond the preloads and the entry point.
    d = page.driver
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    try:
        page.open("modules.*")
        fetched = page.js("""return performance.getEntriesByType('resource').map((e) => new URL(e.name))
            .filter((u) => u.pathname.endsWith('.js')).map((u) => u.pathname.slice(1));""")
    finally:
        d.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
    assert sorted(fetched) == sorted(set(fetched)), f"fetched more than once: {sorted(fetched)}"
    assert set(fetched) == graph | {"js/app.js"}, sorted(fetched)


def test_every_module_of_the_widget_may_be_imported_from_another_origin(server, site):
    graph = module_graph("ringcast-widget.js")
    # The modules the widget shares with the dashboard; notify.js is imported only with `notify`.
    assert {"js/face.js", "js/store.js", "js/connection.js", "js/ring.js", "js/format.js", "js/notify.js"} <= set(graph)
    for path in sorted(graph):
        req = urllib.request.Request(f"{server.base}/{path}", headers={"Origin": site.origin})
        with urllib.request.urlopen(req, timeout=10) as r:
            # A module script from another origin is fetched in CORS mode, without credentials.
            assert r.headers.get("Access-Control-Allow-Origin") in ("*", site.origin), (path, dict(r.headers))
            assert r.headers.get("Content-Type", "").startswith("text/javascript"), (path, dict(r.headers))


def test_modules_import_each_other_without_cycles_and_the_widget_without_the_grid():
    graph = {}
    for entry in ["js/app.js", "ringcast-widget.js", *(f"js/{p.name}" for p in (PUBLIC / "js").glob("*.js"))]:
        graph.update(module_graph(entry))
    done, path = set(), []

    def visit(module):
        assert module not in path, f"an import cycle: {' -> '.join([*path[path.index(module):], module])}"
        if module in done:
            return
        path.append(module)
        for dep in graph[module]:
            visit(dep)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    # What a page showing one task needs is apart from the dashboard's grid.
    grid = {"js/render.js", "js/placement.js", "js/sections.js", "js/card.js", "js/family.js", "js/filter.js",
            "js/catch-up.js", "js/modal.js", "js/summary.js", "js/sparklines.js"}
    assert not grid & set(module_graph("ringcast-widget.js")), sorted(grid & set(module_graph("ringcast-widget.js")))
