"""Screenshots of the web view for the README: the packet list and one packet page.

Run: .venv/bin/python bench/web_screenshots.py

Starts a real ``ltm server run`` on loopback (bench_server's), pushes a few
packets (the example packet among them) and a thread (a packet continuing
another), signs in through the web view's form in Debian's Chromium
(``/usr/bin/chromium``, driven by Playwright; no browser is downloaded), and
writes docs/img/web-list.png and docs/img/web-packet.png: a narrow desktop
viewport at 1x, PNG, each checked to stay under 80 KB.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import Server

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"
CHROMIUM = "/usr/bin/chromium"
MAX_BYTES = 80 * 1024
VIEWPORT = {"width": 820, "height": 600}


def packets() -> list[dict[str, object]]:
    example = json.loads((ROOT / "chalicelib" / "example.json").read_text(encoding="utf-8"))
    first = {
        "ltm_version": "0.2",
        "id": "01JS5LTMSCREENSHOT0000001A",
        "created_at": "2026-04-20T09:12:00Z",
        "goal": "Move the session store from Redis to DynamoDB without logging anyone out.",
        "next_step": "Dual-write sessions behind the SESSION_STORE flag.",
        "tags": ["auth", "migration"],
    }
    second = {
        "ltm_version": "0.2",
        "id": "01JS5LTMSCREENSHOT0000002B",
        "created_at": "2026-04-21T16:40:00Z",
        "parent_id": first["id"],
        "goal": "Finish the dual-write rollout and switch reads to DynamoDB.",
        "success_criteria": ["No session lost during the switch", "p99 login under 200 ms"],
        "decisions": [
            {
                "what": "TTL attribute expires sessions, not a sweeper job.",
                "why": "One less moving part; DynamoDB deletes lazily but reads check expiry.",
                "locked": True,
            }
        ],
        "attempts": [
            {
                "tried": "Backfilling with a scan of the Redis keyspace",
                "outcome": "failed",
                "learned": "SCAN under load stalled logins; copy on read instead.",
            }
        ],
        "next_step": "Flip SESSION_READS=dynamo for 5% of traffic and watch the error rate.",
        "tags": ["auth", "migration"],
    }
    third = {
        "ltm_version": "0.2",
        "id": "01JS5LTMSCREENSHOT0000003C",
        "created_at": "2026-04-23T11:05:00Z",
        "goal": "Cut the CI pipeline under ten minutes.",
        "next_step": "Cache the wheel directory between jobs.",
        "tags": ["ci"],
    }
    return [first, second, example, third]


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), threads=4)
        try:
            import httpx

            _uid, token = server.issue("dana")
            base = f"http://127.0.0.1:{server.port}"
            api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"})
            for packet in packets():
                answer = api.post("/v1/packets", json=packet)
                assert answer.status_code == 201, answer.text
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
                )
                page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
                page.goto(base + "/web")
                page.fill("#token", token)
                with page.expect_navigation():
                    page.click("button[type=submit]")
                shots = {
                    "web-list.png": base + "/web",
                    "web-packet.png": base + "/web/packets/01JS5LTMSCREENSHOT0000002B",
                }
                for name, url in shots.items():
                    page.goto(url)
                    target = OUT / name
                    page.screenshot(path=str(target), full_page=False)
                    size = target.stat().st_size
                    print(f"{target.relative_to(ROOT)}: {size:,} bytes")
                    if size > MAX_BYTES:
                        raise SystemExit(f"{name} is {size} bytes, over {MAX_BYTES}")
                browser.close()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
