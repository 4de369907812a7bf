"""Finding the dashboard and the cluster token, as the `manta job` commands do.

The dashboard's URL, first found of:
  1. the address given (``"auto"`` counts as none);
  2. $MANTA_DASHBOARD_ADDRESS;
  3. $MANTA_ADDRESS when it is an http:// or https:// URL;
  4. ``<temp_dir>/session_latest/dashboard_address``, written by
     ``manta start --head`` on this host (temp_dir: /tmp/manta by default).
A URL without a scheme gets http://; trailing slashes are dropped.

The token, sent as ``Authorization: Bearer <token>``: $MANTA_TOKEN, else the
session's token file when that session's dashboard is the one addressed
(the file must be mode 0600, as the CLI requires); else none.
"""

import os
import re
import stat

DEFAULT_TEMP_DIR = "/tmp/manta"
ADDRESS_ENV = "MANTA_ADDRESS"
DASHBOARD_ADDRESS_ENV = "MANTA_DASHBOARD_ADDRESS"
TOKEN_ENV = "MANTA_TOKEN"

_TOKEN_RE = re.compile(r"^[A-Za-z0-9._-]{16,256}$")


def _latest_session(temp_dir):
    """The directory session_latest points at, or None."""
    link = os.path.join(temp_dir, "session_latest")
    try:
        target = os.readlink(link)
    except OSError:
        return None
    path = target if os.path.isabs(target) else os.path.join(temp_dir, target)
    return path if os.path.isdir(path) else None


def _read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _normalize(url):
    url = url.strip()
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    return url.rstrip("/")


def resolve_dashboard_url(address=None, temp_dir=None):
    """The dashboard's URL; ConnectionError when none can be found."""
    temp_dir = temp_dir or DEFAULT_TEMP_DIR
    url = address if address and address != "auto" else None
    if not url:
        url = os.environ.get(DASHBOARD_ADDRESS_ENV) or None
    if not url:
        env = os.environ.get(ADDRESS_ENV, "")
        if env.startswith(("http://", "https://")):
            url = env
    if not url:
        session = _latest_session(temp_dir)
        url = _read_text(os.path.join(session, "dashboard_address")) if session else None
        if not url:
            raise ConnectionError(f"no dashboard found under {temp_dir} (pass address='http://HOST:8265' "
                                  f"or set {DASHBOARD_ADDRESS_ENV})")
    return _normalize(url)


def validate_token(token, where):
    if not _TOKEN_RE.match(token):
        raise ValueError(f"{where}: a token is 16 to 256 characters of [A-Za-z0-9._-]")
    return token


def read_token_file(path):
    """The token in `path`; refuses a file others may read, as the CLI does."""
    st = os.stat(path)
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise PermissionError(f"token file {path} is readable by others; expected mode 0600")
    with open(path, encoding="utf-8") as f:
        return validate_token(f.read().strip(), f"token file {path}")


def resolve_token(url, temp_dir=None):
    """The token for the dashboard at `url`, or "" when there is none to send."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return validate_token(env, TOKEN_ENV)
    session = _latest_session(temp_dir or DEFAULT_TEMP_DIR)
    if not session:
        return ""
    recorded = _read_text(os.path.join(session, "dashboard_address"))
    token_file = os.path.join(session, "token")
    if not recorded or _normalize(recorded) != url or not os.path.exists(token_file):
        return ""
    return read_token_file(token_file)
