"""Helpers for the console's tests: Debian's Chromium through Playwright, and a `sqsdelay
console` process on a free port."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import wait_for

# Debian's Chromium, as the cost report's layout test finds it (.ci/run installs it as root);
# Playwright's own browser download is not used (nothing is downloaded: executable_path).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _playwright() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or not _playwright(),
    reason="Chromium (apt install chromium) and playwright (make test installs it) needed",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status_of(url: str, **headers: str) -> int:
    """The HTTP status of a GET, redirects not followed."""
    return int(requests.get(url, headers=headers, allow_redirects=False, timeout=10).status_code)


@contextlib.contextmanager
def console_process(env: dict[str, str], *args: str, port: int | None = None) -> Iterator[str]:
    """`sqsdelay console --port P ARGS` until the block ends (P: `port`, or a free one);
    yields its base URL."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    # stderr to a file, not a pipe: a full pipe would block the console
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sqsdelay", "console", "--port", str(port), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:

            def answering() -> bool:
                if proc.poll() is not None:
                    errors.seek(0)
                    raise AssertionError(f"the console exited: {errors.read().decode()[-2000:]}")
                try:
                    return status_of(url + "/signin") > 0
                except requests.ConnectionError:
                    return False

            wait_for(answering, timeout=30, interval=0.1)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@contextlib.contextmanager
def browser(*args: str) -> Iterator[Any]:
    """A headless Chromium (Debian's) at 1280x800; `args`, Chromium's command-line flags."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(args))
        try:
            yield chromium
        finally:
            chromium.close()


def fits_1280(page: Any) -> bool:
    """No horizontal scrolling at 1280 px."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= 1280"))


@contextlib.contextmanager
def app_served(app: Any, host: str = "127.0.0.1", **options: Any) -> Iterator[str]:
    """An ASGI application served by uvicorn from a thread on a free port; yields its URL.
    `options`: uvicorn's (proxy_headers, forwarded_allow_ips, ...)."""
    import threading

    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        log_level="warning",
        **options,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), timeout=10, interval=0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def vm_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB (/proc)."""
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
    return found


# Debian's nginx (.ci/run installs nginx-light as it installs Chromium), a TLS-terminating
# reverse proxy in front of a console, run as a subprocess with its own configuration.
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
needs_nginx = pytest.mark.skipif(
    NGINX is None and not os.environ.get("CI"),
    reason="nginx (apt install nginx-light; .ci/run installs it) needed",
)


def self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name` (and 127.0.0.1), valid for a day: (cert, key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@contextlib.contextmanager
def tls_proxy(folder: Path, upstream_port: int, name: str, *, bind_from: str) -> Iterator[int]:
    """nginx on 127.0.0.1:PORT terminating TLS for `name` in front of the console on
    127.0.0.1:`upstream_port`, connecting from `bind_from` (another loopback address: a
    proxy on another host, as far as the console can tell) and passing the browser's Host,
    address and scheme (X-Forwarded-For, X-Forwarded-Proto). Yields PORT."""
    assert NGINX is not None, "nginx is not installed (apt install nginx-light)"
    cert, key = self_signed(folder, name)
    port = free_port()
    for temp in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (folder / temp).mkdir(exist_ok=True)
    conf = folder / "nginx.conf"
    conf.write_text(
        f"""
daemon off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name {name};
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://127.0.0.1:{upstream_port};
            proxy_bind {bind_from};
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
        }}
    }}
}}
"""
    )
    proc = subprocess.Popen(
        [NGINX, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def listening() -> bool:
            if proc.poll() is not None:
                log = folder / "error.log"
                raise AssertionError(f"nginx exited: {log.read_text() if log.exists() else ''}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_for(listening, timeout=20, interval=0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)
