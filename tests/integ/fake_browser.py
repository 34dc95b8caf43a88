#!/usr/bin/python3
"""A stand-in for `xdg-open` and the browser behind it, for test_browser_open.py.

Records its argv and environment, lingers a moment as a browser would (its
command line stays readable in /proc), then does what a browser does with what
it was given: reads the page, takes the link it sends the browser on to, and
opens it — the daemon's sign-in answers with a cookie, which it then uses once.
Writes what it saw as JSON to $FAKE_BROWSER_LOG/<pid>.json.
"""
import http.client
import json
import os
import re
import stat
import sys
import time
import urllib.parse

LINGER_S = 1.0


def get(url, cookie=None):
    u = urllib.parse.urlsplit(url)
    headers = {"Host": u.netloc, "Sec-Fetch-Site": "cross-site"}  # a navigation from a file: page
    if cookie:
        headers["Cookie"] = cookie
    c = http.client.HTTPConnection("127.0.0.1", u.port, timeout=30)
    c.request("GET", u.path + ("?" + u.query if u.query else ""), headers=headers)
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    c.close()
    return r.status, r.getheader("Set-Cookie"), body


def follow(page, seen):
    st = os.lstat(page)
    seen["page_mode"] = stat.S_IMODE(st.st_mode)
    seen["page_uid"] = st.st_uid
    seen["dir_mode"] = stat.S_IMODE(os.lstat(os.path.dirname(page)).st_mode)
    with open(page) as f:
        html = f.read()
    url = re.search(r"location\.replace\('([^']*)'\)", html).group(1)
    refresh = re.search(r'http-equiv="refresh" content="0; url=([^"]*)"', html).group(1)
    seen["refresh_agrees"] = refresh.replace("&amp;", "&") == url
    seen["url"] = url
    status, set_cookie, _ = get(url)
    seen["login_status"] = status
    cookie = (set_cookie or "").split(";", 1)[0]
    seen["cookie_name"] = cookie.split("=", 1)[0]
    u = urllib.parse.urlsplit(url)
    if u.path == "/ui/login":
        status, _, body = get(f"{u.scheme}://{u.netloc}/api/v1/session", cookie)
        seen["signed_in_as"] = json.loads(body).get("user") if status == 200 else None
    else:  # a run's origin: its own page with the origin's cookie
        status, _, body = get(f"{u.scheme}://{u.netloc}/hello.txt", cookie)
        seen["run_page"] = body if status == 200 else status


def main():
    seen = {"argv": sys.argv, "environ": dict(os.environ)}
    time.sleep(LINGER_S)
    try:
        follow(sys.argv[1], seen)
    except Exception as e:  # noqa: BLE001 - reported to the test
        seen["error"] = repr(e)
    with open(os.path.join(os.environ["FAKE_BROWSER_LOG"], f"{os.getpid()}.json"), "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main()
