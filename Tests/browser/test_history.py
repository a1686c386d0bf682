"""ETA from history on the dashboard, in headless Chromium against the real
server: after three finished runs of a kind, the fourth run's card says what the kind usually
takes, and "slower than usual" once the server flags it past the kind's 90th percentile."""

import time


def usual(page, task_id):
    return page.js("""const c = document.querySelector(`.task[data-id="${arguments[0]}"]`);
        const u = c && c.querySelector('.usual');
        return u && {text: u.textContent, slow: u.classList.contains('slow'),
                     eta: c.querySelector('.eta').textContent, shown: u.getClientRects().length > 0};""", task_id)


def test_a_card_says_what_its_kind_usually_takes_and_when_it_is_slower(page, server):
    post = server.post
    # Three runs of about a second each, measured by the server's own clock (so at least that).
    for run, seconds in enumerate((1.0, 1.2, 1.1)):
        post(f"/api/tasks/h.deploy-{run}", {"title": f"Deploy {run}", "progress": None})
        time.sleep(seconds)  # not a wait: the length of the run
        post(f"/api/tasks/h.deploy-{run}", {"state": "done"})
    kinds = {k["kind"]: k for k in server.api("GET", "/api/kinds")["kinds"]}
    assert kinds["h.deploy"]["runs"] == 3 and kinds["h.deploy"]["median"] >= 1.1, kinds

    page.open("h.*")
    answer = post("/api/tasks/h.deploy-3", {"title": "Deploy 3", "progress": None})
    assert answer["task"]["expectedSeconds"] == kinds["h.deploy"]["median"]
    page.sync(answer["seq"])
    first = usual(page, "h.deploy-3")
    assert first["shown"] and first["text"].startswith("usually "), first
    assert not first["slow"]
    assert first["eta"].startswith("ETA "), "a spinner gets an ETA from its kind"
    page.shot(f"{page.name}-usual")

    # Past the kind's 90th percentile the server flags it, on time, with no update from us.
    flagged = page.wait(lambda: (u := usual(page, "h.deploy-3")) and u["slow"] and u, 10, "never flagged slow")
    assert flagged["text"].startswith("slower than usual · usually "), flagged
    assert page.js("""const u = document.querySelector('.task[data-id="h.deploy-3"] .usual');
        return getComputedStyle(u).fontWeight""") == "600"
    page.shot(f"{page.name}-slow")

    # Finished, the card says neither.
    seq = post("/api/tasks/h.deploy-3", {"state": "done"})["seq"]
    page.sync(seq)
    assert usual(page, "h.deploy-3")["text"] == ""
