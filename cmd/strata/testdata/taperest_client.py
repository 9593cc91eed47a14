"""A WLCG Tape REST API client written from the v1 reference document, as
FTS and gfal2 use the API: discover the endpoint, stage a list of files in
one request, poll it, cancel some, release the rest, ask archiveinfo.

  TAPE_REST        the server (http://host:port)
  TOKEN            a bearer token with storage.stage and storage.read
  FILES            a file of paths, one per line
  OUT              where to write a JSON summary for the Go test

TestTapeREST (cmd/strata/taperest_test.go) runs it and checks the summary
against the library's mount counters and `strata ls -l`.
"""
import json, os, time, urllib.request, urllib.error

BASE = os.environ["TAPE_REST"]
HDR = {"Authorization": "Bearer " + os.environ["TOKEN"], "Content-Type": "application/json"}


def call(method, path, body=None, auth=True):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=HDR if auth else {})
    try:
        with urllib.request.urlopen(req) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), e.headers


st, wk, _ = call("GET", "/.well-known/wlcg-tape-rest-api", auth=False)
assert st == 200 and wk["endpoints"][0]["version"] == "v1", wk
api = "/" + wk["endpoints"][0]["uri"].split("/", 3)[3].rstrip("/")  # "/api/v1"

st, body, hdr = call("POST", api + "/stage", {"files": [{"path": "/x"}]}, auth=False)
assert st == 401 and body["status"] == 401 and hdr["Content-Type"] == "application/problem+json", (st, body)

paths = [l.strip() for l in open(os.environ["FILES"]) if l.strip()]
st, body, hdr = call("POST", api + "/stage", {"files": [{"path": p, "diskLifetime": "P1D"} for p in paths] + [{"path": "/no/such/file"}]})
assert st == 201 and body["requestId"] and hdr["Location"].endswith(body["requestId"]), (st, body)
rid = body["requestId"]

# Cancel the second half at once, before their recalls could finish.
half = paths[len(paths) // 2:]
st, body, _ = call("POST", api + "/stage/%s/cancel" % rid, {"paths": half})
assert st == 200, (st, body)

t0 = time.time()
while True:
    st, req, _ = call("GET", api + "/stage/" + rid)
    assert st == 200 and req["id"] == rid and req["createdAt"] > 0, (st, req)
    states = {}
    for f in req["files"]:
        states[f["state"]] = states.get(f["state"], 0) + 1
    if "completedAt" in req:
        break
    assert time.time() - t0 < 120, states
    time.sleep(0.2)
byPath = {f["path"]: f for f in req["files"]}
assert byPath["/no/such/file"]["state"] == "FAILED" and byPath["/no/such/file"]["error"], byPath["/no/such/file"]
cancelled = sum(1 for p in half if byPath[p]["state"] == "CANCELLED")
completed = [p for p in paths[:len(paths) // 2] if byPath[p]["state"] == "COMPLETED" and byPath[p]["onDisk"]]
assert len(completed) == len(paths) // 2, states

st, info, _ = call("POST", api + "/archiveinfo", {"paths": paths + ["/no/such/file"]})
assert st == 200 and len(info) == len(paths) + 1, (st, info)
locality = {i["path"]: i.get("locality") for i in info}
assert "error" in info[-1], info[-1]

st, body, _ = call("POST", api + "/release/" + rid, {"paths": paths[:len(paths) // 2]})
assert st == 200, (st, body)
st, body, _ = call("POST", api + "/release/" + rid, {"paths": ["/not/in/request"]})
assert st == 400, (st, body)
st, body, _ = call("DELETE", api + "/stage/" + rid)
assert st == 200, (st, body)
st, body, _ = call("GET", api + "/stage/" + rid)
assert st == 404 and body["status"] == 404, (st, body)

json.dump({"cancelled": cancelled, "completed": len(completed), "locality": locality, "seconds": time.time() - t0}, open(os.environ["OUT"], "w"))
print("ok taperest: %d completed, %d cancelled in %.1f s" % (len(completed), cancelled, time.time() - t0))
