"""export/hub.py: download the files of a Hugging Face model repo, resumably and verified.

Listing: GET {endpoint}/api/models/{repo}/tree/{revision} returns one JSON object per top-level file:
{"type": "file", "path": ..., "size": ..., "oid": <git blob sha1>, "lfs": {"oid": <sha256>, "size": ...}}
("lfs" only for files stored in LFS, i.e. the weights). We use the tree API because it gives every file's
size and checksum in one request.
Files: GET {endpoint}/{repo}/resolve/{revision}/{path} (the hub redirects LFS files to a CDN).

Each file downloads to <cache>/<path>.part, resumes from the part's size with an HTTP Range request, is
checked (size, then sha256 of LFS files or the git blob sha1 of small ones) and only then renamed to
<cache>/<path>. A file already in the cache is re-verified, not fetched again.
Environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (sent as "Authorization: Bearer").

Public: list_files(repo, revision) -> {path: FileInfo}; download(repo, revision, info, cache_dir);
HubError for every problem.
"""
import hashlib
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CHUNK = 1 << 20


class HubError(Exception):
    pass


class FileInfo:
    def __init__(self, path, size, sha256=None, git_sha1=None):
        self.path = path
        self.size = size
        self.sha256 = sha256        # LFS files
        self.git_sha1 = git_sha1    # other files: the git blob id


def endpoint():
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


class _SameHostAuthRedirect(urllib.request.HTTPRedirectHandler):
    """Follows redirects but drops the token when the redirect leaves the hub's host (e.g. to a CDN)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


_opener = urllib.request.build_opener(_SameHostAuthRedirect)


def _open(url, extra_headers=None):
    headers = {"User-Agent": "kvq-export/1"}
    token = os.environ.get("HF_TOKEN")
    if token:
        headers["Authorization"] = "Bearer " + token
    headers.update(extra_headers or {})
    try:
        return _opener.open(urllib.request.Request(url, headers=headers), timeout=60)
    except urllib.error.HTTPError as e:
        hint = " (gated or private repo? set HF_TOKEN)" if e.code in (401, 403) else ""
        raise HubError("%s: HTTP %d %s%s" % (url, e.code, e.reason, hint)) from None
    except (urllib.error.URLError, OSError) as e:
        raise HubError("%s: %s" % (url, getattr(e, "reason", e))) from None


def _quote(s):
    return urllib.parse.quote(s, safe="")


def list_files(repo, revision):
    """The repo's top-level files at revision, from the tree API."""
    url = "%s/api/models/%s/tree/%s" % (endpoint(), repo, _quote(revision))
    with _open(url) as r:
        try:
            entries = json.loads(r.read())
        except ValueError:
            raise HubError("%s: response is not JSON" % url) from None
    if not isinstance(entries, list):
        raise HubError("%s: expected a JSON list of files" % url)
    files = {}
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != "file":
            continue
        path, size, lfs = e.get("path"), e.get("size"), e.get("lfs")
        if not isinstance(path, str) or not isinstance(size, int) or "/" in path or path.startswith("."):
            continue  # only plain top-level files matter (and a path must never escape the cache folder)
        if isinstance(lfs, dict):
            files[path] = FileInfo(path, lfs.get("size", size), sha256=lfs.get("oid"))
        else:
            files[path] = FileInfo(path, size, git_sha1=e.get("oid"))
    return files


class _Progress:
    """One self-overwriting line on stderr: name, MB done / total, percent, speed."""

    def __init__(self, name, total, start_at):
        self.name, self.total, self.start_at = name, total, start_at
        self.t0 = self.last = time.monotonic()

    def update(self, done, final=False):
        now = time.monotonic()
        if not final and now - self.last < 0.5:
            return
        self.last = now
        rate = (done - self.start_at) / max(now - self.t0, 1e-6) / 1e6
        pct = 100.0 * done / self.total if self.total else 100.0
        sys.stderr.write("\r  %s  %.1f / %.1f MB  %5.1f%%  %.1f MB/s " %
                         (self.name, done / 1e6, self.total / 1e6, pct, rate))
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _hasher(info):
    """A hash object preloaded as the file's checksum needs, and the expected hex digest."""
    if info.sha256:
        return hashlib.sha256(), info.sha256
    h = hashlib.sha1()
    h.update(b"blob %d\0" % info.size)   # git's blob id covers this header, then the content
    return h, info.git_sha1


def _hash_file(path, h):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)


def _read_block(response):
    """The next block of the body, b"" at its end; a dropped connection ends it early (kept for resuming)."""
    try:
        return response.read(CHUNK)
    except http.client.IncompleteRead as e:
        return e.partial
    except (http.client.HTTPException, OSError):
        return b""


class _Restart(Exception):
    pass


def _fetch(url, part, info, h):
    """Appends the rest of the file to part (resuming at its size), feeding h with every byte."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    if have > info.size:
        os.remove(part)
        have = 0
    if have:
        _hash_file(part, h)
    if have == info.size:
        return
    with _open(url, {"Range": "bytes=%d-" % have} if have else None) as r:
        if have and r.status != 206:   # the server ignored the Range: start over
            raise _Restart()
        if have and not r.headers.get("Content-Range", "").startswith("bytes %d-" % have):
            raise HubError("%s: server answered the resume with a different range" % url)
        progress = _Progress(info.path, info.size, have)
        done = have
        with open(part, "ab") as out:
            while True:
                block = _read_block(r)
                if not block:
                    break
                if done + len(block) > info.size:
                    raise HubError("%s: more data than the listed %d bytes" % (url, info.size))
                out.write(block)
                h.update(block)
                done += len(block)
                progress.update(done)
        progress.update(done, final=True)
    if done != info.size:
        raise HubError("%s: connection ended at %d of %d bytes (run again to resume)" % (url, done, info.size))


def download(repo, revision, info, cache_dir):
    """Makes cache_dir/info.path a verified copy of the repo's file; returns its path."""
    final = os.path.join(cache_dir, info.path)
    part = final + ".part"
    h, want = _hasher(info)
    if os.path.exists(final):
        _hash_file(final, h)
        if os.path.getsize(final) == info.size and h.hexdigest() == want:
            return final
        os.remove(final)   # stale or damaged: fetch again
        h, want = _hasher(info)
    url = "%s/%s/resolve/%s/%s" % (endpoint(), repo, _quote(revision), urllib.parse.quote(info.path))
    try:
        _fetch(url, part, info, h)
    except _Restart:
        os.remove(part)
        h, want = _hasher(info)
        _fetch(url, part, info, h)
    if want and h.hexdigest() != want:
        os.remove(part)
        raise HubError("%s: checksum mismatch (got %s, listed %s); the partial download was deleted"
                       % (info.path, h.hexdigest(), want))
    os.replace(part, final)
    return final
