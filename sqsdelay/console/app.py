"""The console's web application (Starlette, Jinja2 with autoescape, a little htmx).

Every page needs who is asking (`_who`): a bearer token, a signed-in session, or, on a
console without tokens (loopback only), the local user. Every action is a POST that must
come from this console's own page: same origin (the browser's Origin and Sec-Fetch-Site
headers, when it sends them) and the session's CSRF token; a bearer-token request (a
script, which no browser sends on its own) needs no CSRF token. A request another site
makes (`Sec-Fetch-Site` other than same-origin or none) is refused on every route, pages
and static files too, and a body over MAX_BODY_BYTES before anything reads it. Responses
forbid inline scripts (Content-Security-Policy), framing and caching; errors show their
typed message, never a traceback."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sqsdelay.console import timefmt
from sqsdelay.console.auth import (
    LOCAL,
    Sessions,
    Throttle,
    Tokens,
    bearer,
    cookie_name,
    given_bytes,
    host_allowed,
)
from sqsdelay.console.service import ActionResult, ConsoleService, Filters
from sqsdelay.errors import InvalidInput, RegistryError, SqsDelayError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.console")
HERE = Path(__file__).parent
# A request's body is read (at most this much) before anything parses it: the largest form,
# 50 selected ids of 128 characters percent-encoded, is about 20 KiB.
MAX_BODY_BYTES = 64 * 1024
MAX_FIELDS = 64  # a form's fields: 50 ids and a few others
MAX_FIELD_BYTES = 8 * 1024  # one field (an id is at most 128 characters)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # not no-referrer: under it Chromium sends `Origin: null` with the console's own forms
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """Adds `HEADERS` to every response, the static files' too; refuses a request addressed
    to a host name the console does not serve (`auth.host_allowed`, 421), one another site
    made (`Sec-Fetch-Site`, 403), and a body over MAX_BODY_BYTES (413), before the
    application sees any of them. The body is read here, so nothing parses more."""

    def __init__(self, app: ASGIApp, bind: str, origin: str | None = None) -> None:
        self.app = app
        self.bind = bind
        self.origin = origin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if not host_allowed(host, self.bind, self.origin):
                names = "127.0.0.1 or localhost"
                if self.origin:
                    names += f" or {self.origin}"
                refused = _refused(421, f"this console answers only to {names}")
                await refused(scope, receive, send)
                return
            site = headers.get(b"sec-fetch-site", b"").decode("latin-1")
            if site and site not in ("same-origin", "none"):
                log.warning(
                    "console.refused",
                    who="-",
                    action=str(scope.get("path", ""))[:200],
                    reason="cross-site request",
                    client=_client_of(scope),
                )
                refused = _refused(
                    403,
                    "a request from another site; nothing was read or done. Open the "
                    "console's address yourself",
                )
                await refused(scope, receive, send)
                return
            body = await _bounded_body(headers, receive)
            if body is None:
                await _refused(413, f"a body over {MAX_BODY_BYTES} bytes")(scope, receive, send)
                return
            receive = _replaying(body, receive)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    *((k.encode(), v.encode()) for k, v in HEADERS.items()),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _bounded_body(headers: dict[bytes, bytes], receive: Receive) -> bytes | None:
    """The request's whole body, or None when it is (or says it is) over MAX_BODY_BYTES:
    then no more of it is read."""
    length = headers.get(b"content-length", b"").decode("latin-1").strip()
    if length and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: the application sees an empty body
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body read already, then waits as the server's does."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _client_of(scope: Scope) -> str:
    """The client's address: the peer's, or the one a trusted proxy named
    (`--forwarded-allow-ips`: uvicorn's proxy headers rewrite the scope)."""
    client = scope.get("client")
    return str(client[0]) if client else "-"


@dataclass
class Caller:
    who: str
    sid: str | None  # the session (a browser); None with a bearer token
    new_session: bool = False


def row_id(message_id: str) -> str:
    """An element id for a message: ids may hold any punctuation, a hash holds none."""
    return hashlib.sha256(message_id.encode()).hexdigest()[:16]


def create_app(
    service: ConsoleService,
    tokens: Tokens,
    sessions: Sessions | None = None,
    *,
    bind: str = "127.0.0.1",
    origin: str | None = None,
    throttle: Throttle | None = None,
) -> Any:
    """The application; `bind`, the address it is served on (loopback: loopback names only);
    `origin`, the public origin behind a proxy (`auth.public_origin`), the one its forms
    must come from."""
    sessions = sessions if sessions is not None else Sessions()  # empty: falsy
    throttle = throttle if throttle is not None else Throttle()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # everything a producer wrote is shown as text
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(
        relative=timefmt.relative, utc=timefmt.utc, readable=timefmt.readable, row_id=row_id
    )

    def render(
        request: Request, caller: Caller | None, name: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        csrf = sessions.csrf(caller.sid) if caller and caller.sid else ""
        html = env.get_template(name).render(
            caller=caller,
            csrf=csrf,
            read_only=service.read_only,
            registry_on=service.registry_on,
            signed_in=tokens.required,
            path=request.url.path,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        if caller and caller.new_session and caller.sid:
            set_cookie(response, caller.sid, request)
        return response

    def cookie(request: Request) -> str:
        return cookie_name(request.headers.get("host"), origin)

    def set_cookie(response: Response, sid: str, request: Request) -> None:
        secure = origin.startswith("https:") if origin else request.url.scheme == "https"
        response.set_cookie(
            cookie(request), sid, httponly=True, samesite="strict", secure=secure, path="/"
        )

    def who(request: Request) -> Caller | Response | None:
        """Who asks: a Caller, None (not signed in), or the answer to a wrong or throttled
        bearer token (401, 429)."""
        given = bearer(request.headers.get("authorization"))
        if given is not None:
            client = _client_of(request.scope)
            wait = throttle.retry_after(client)
            if wait:
                return _throttled(client, wait, "bearer")
            name = tokens.who(given_bytes(given)) if tokens.required else None
            if name is None:
                throttle.wrong(client)
                log.warning("console.token_refused", client=client, via="bearer")
                return _refused(401, "the token is not valid")
            return Caller(name, None)
        sid = request.cookies.get(cookie(request))
        if not tokens.required:  # a loopback console: its session proves itself
            if sessions.is_local(sid) and sid is not None:
                return Caller(LOCAL, sid)
            return Caller(LOCAL, sessions.local(), new_session=True)
        found = sessions.who(sid)
        if found is not None and sid is not None:
            return Caller(found, sid)
        return None

    Handler = Callable[[Request, Caller], Awaitable[Response]]

    def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            caller = who(request)
            if isinstance(caller, Response):
                return caller
            if caller is None:
                return RedirectResponse("/signin", status_code=303)
            return await _guarded(request, caller, handler)

        return endpoint

    def action(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not _same_origin(request, origin):  # first: a cross-site request has no cookie
                service.refused("-", request.url.path, "cross-site request")
                return _refused(403, "a request from another site: this action was not done")
            caller = who(request)
            if isinstance(caller, Response):
                return caller
            if caller is None or caller.new_session:
                service.refused("-", request.url.path, "not signed in")
                return _refused(403, "sign in first: this action was not done")
            form = await _form(request)
            if caller.sid is not None and not sessions.csrf_ok(caller.sid, _one(form, "csrf")):
                service.refused(caller.who, request.url.path, "missing or wrong CSRF token")
                return _refused(403, "the form's token is missing or stale: reload the page")
            request.state.form = form
            return await _guarded(request, caller, handler)

        return endpoint

    async def _guarded(request: Request, caller: Caller, handler: Handler) -> Response:
        try:
            return await handler(request, caller)
        except (InvalidInput, RegistryError, SqsDelayError) as exc:
            status = 400 if isinstance(exc, InvalidInput) else 502
            if request.headers.get("hx-request"):
                return render(request, caller, "_outcomes.html", status, outcomes=[], error=exc)
            return render(request, caller, "error.html", status, error=str(exc))
        except HTTPException:
            raise
        except Exception:
            log.exception("console.failed", path=request.url.path)
            return render(
                request,
                caller,
                "error.html",
                500,
                error="the console failed; its log (stderr) says why",
            )

    # -- pages -------------------------------------------------------------------------

    async def home(request: Request, caller: Caller) -> Response:
        response = RedirectResponse("/scheduled", status_code=303)
        if caller.new_session and caller.sid:
            set_cookie(response, caller.sid, request)
        return response

    async def scheduled(request: Request, caller: Caller) -> Response:
        q = request.query_params
        destinations = await run_in_threadpool(service.destinations)
        destination = q.get("destination") or (destinations[0] if destinations else "")
        fields = ("state", "due_after", "due_before", "id_prefix", "tag")
        filters_form = {k: q.get(k, "") for k in fields}
        filters_form["state"] = filters_form["state"] or "scheduled"
        context: dict[str, Any] = {
            "destinations": destinations,
            "destination": destination,
            "form": filters_form,
            "records": [],
            "next_link": None,
            "page": None,
            "error": None,
            "now_ms": _now_ms(),
            "parked": None,
            "tagged": None,  # with a tag: how many carry it (the rows: up to 100 of them)
        }
        if destination and not service.registry_on:
            if destination not in destinations:
                service.known(destination)
            context["parked"] = await run_in_threadpool(service.parked, destination)
        if destination and service.registry_on:
            try:
                if destination not in destinations:
                    service.known(destination)
                tag = filters_form["tag"].strip()
                if tag:  # the tag's messages, from its index: no due-time paging
                    matched, records = await run_in_threadpool(
                        service.tagged, destination, tag, filters_form["state"]
                    )
                    context.update(records=records, tagged={"tag": tag, "matched": matched})
                    return render(request, caller, "scheduled.html", **context)
                filters = Filters(
                    state=filters_form["state"],
                    due_after=_time(filters_form["due_after"], "'due after'"),
                    due_before=_time(filters_form["due_before"], "'due before'"),
                    id_prefix=filters_form["id_prefix"].strip(),
                )
                query = service.query(destination, filters)
                result, following = await run_in_threadpool(
                    service.page, query, q.get("page") or None
                )
            except InvalidInput as exc:
                context["error"] = str(exc)
                return render(request, caller, "scheduled.html", 400, **context)
            context["records"] = result.records
            context["page"] = result
            if following:
                params = {"destination": destination, **filters_form, "page": following}
                context["next_link"] = "/scheduled?" + urlencode(params)
        return render(request, caller, "scheduled.html", **context)

    async def dead_letters(request: Request, caller: Caller) -> Response:
        """The page: which destination; nothing is received until the user asks (a POST
        from this page, `list_dead_letters`), as listing receives each message."""
        q = request.query_params
        destinations = await run_in_threadpool(service.destinations)
        destination = q.get("destination") or (destinations[0] if destinations else "")
        return render(
            request,
            caller,
            "dead_letters.html",
            destinations=destinations,
            destination=destination,
            letters=None,
            show_values=q.get("values") == "1",
            now_ms=_now_ms(),
        )

    async def list_dead_letters(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        destinations = await run_in_threadpool(service.destinations)
        destination = _one(form, "destination") or ""
        letters: list[Any] = []
        if destination:
            if destination not in destinations:
                service.known(destination)
            letters = await run_in_threadpool(service.dead_letters, destination)
        return render(
            request,
            caller,
            "dead_letters.html",
            destinations=destinations,
            destination=destination,
            letters=letters,
            show_values=_one(form, "values") == "1",
            now_ms=_now_ms(),
        )

    async def health(request: Request, caller: Caller) -> Response:
        destinations = await run_in_threadpool(service.destinations)
        report = await run_in_threadpool(service.health, destinations)
        return render(request, caller, "health.html", destinations=destinations, report=report)

    # -- actions -----------------------------------------------------------------------

    def _outcomes(request: Request, caller: Caller, outcomes: list[ActionResult]) -> Response:
        name = "_outcomes.html" if request.headers.get("hx-request") else "outcomes.html"
        return render(request, caller, name, outcomes=outcomes, error=None)

    async def cancel(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        ids = [str(v) for v in form.getlist("id")]
        out = await run_in_threadpool(
            service.cancel, caller.who, _one(form, "destination") or "", ids
        )
        return _outcomes(request, caller, out)

    async def cancel_tagged(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        out = await run_in_threadpool(
            service.cancel_tagged,
            caller.who,
            _one(form, "destination") or "",
            (_one(form, "tag") or "").strip(),
            _one(form, "confirmed") or "",
        )
        return _outcomes(request, caller, [out])

    async def reschedule(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        at = timefmt.parse_time(_one(form, "at") or "", "the new time")
        out = await run_in_threadpool(
            service.reschedule,
            caller.who,
            _one(form, "destination") or "",
            _one(form, "id") or "",
            at,
        )
        return _outcomes(request, caller, [out])

    async def send_now(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        out = await run_in_threadpool(
            service.send_now, caller.who, _one(form, "destination") or "", _one(form, "id") or ""
        )
        return _outcomes(request, caller, [out])

    async def replay(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        ids = [str(v) for v in form.getlist("id")]
        out = await run_in_threadpool(
            service.replay, caller.who, _one(form, "destination") or "", ids
        )
        return _outcomes(request, caller, out)

    async def pause(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        destination = _one(form, "destination") or ""
        out = await run_in_threadpool(service.set_paused, caller.who, destination, True)
        return _outcomes(request, caller, [out])

    async def resume(request: Request, caller: Caller) -> Response:
        form: FormData = request.state.form
        destination = _one(form, "destination") or ""
        out = await run_in_threadpool(service.set_paused, caller.who, destination, False)
        return _outcomes(request, caller, [out])

    # -- signing in ----------------------------------------------------------------------

    async def signin_page(request: Request) -> Response:
        if not tokens.required:
            return RedirectResponse("/scheduled", status_code=303)
        return render(request, None, "signin.html", error=None)

    async def signin(request: Request) -> Response:
        if not tokens.required:
            return RedirectResponse("/scheduled", status_code=303)
        if not _same_origin(request, origin):
            return _refused(403, "a sign-in from another site was refused")
        client = _client_of(request.scope)
        wait = throttle.retry_after(client)
        if wait:
            return _throttled(client, wait, "sign-in page")
        form = await _form(request)
        name = tokens.who(_one(form, "token") or "")
        if name is None:
            throttle.wrong(client)
            log.warning("console.token_refused", client=client, via="sign-in page")
            return render(request, None, "signin.html", 403, error="that token is not valid")
        sid = sessions.start(name)
        log.info("console.signed_in", who=name, client=client)
        response = RedirectResponse("/scheduled", status_code=303)
        set_cookie(response, sid, request)
        return response

    async def signout(request: Request, caller: Caller) -> Response:
        sessions.end(caller.sid)
        response = RedirectResponse("/signin" if tokens.required else "/", status_code=303)
        response.delete_cookie(cookie(request))
        return response

    async def changes_nothing(request: Request) -> Response:
        return _refused(403, "actions are POSTs from the console's own page; nothing was done")

    writes = [
        Route("/actions/cancel", action(cancel), methods=["POST"]),
        Route("/actions/cancel-tagged", action(cancel_tagged), methods=["POST"]),
        Route("/actions/reschedule", action(reschedule), methods=["POST"]),
        Route("/actions/send-now", action(send_now), methods=["POST"]),
        Route("/actions/replay", action(replay), methods=["POST"]),
        Route("/actions/pause", action(pause), methods=["POST"]),
        Route("/actions/resume", action(resume), methods=["POST"]),
    ]
    if service.read_only:  # the pages without any action
        writes = []
    routes = [
        Route("/", page(home)),
        Route("/scheduled", page(scheduled)),
        Route("/dead-letters", page(dead_letters), methods=["GET"]),
        # listing receives the messages (their receive count rises): only when asked, from
        # this page, read-only consoles too
        Route("/dead-letters", action(list_dead_letters), methods=["POST"]),
        Route("/health", page(health)),
        Route("/signin", signin_page, methods=["GET"]),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", action(signout), methods=["POST"]),
        *writes,
        Route("/actions/{name}", changes_nothing, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    return SecurityHeaders(app, bind, origin)


def _refused(status: int, why: str) -> Response:
    return Response(f"refused: {why}\n", status_code=status, media_type="text/plain")


def _throttled(client: str, wait: int, via: str) -> Response:
    log.warning("console.token_throttled", client=client, via=via, retry_after_s=wait)
    response = _refused(429, f"too many wrong tokens from {client}: try again in {wait} s")
    response.headers["retry-after"] = str(wait)
    return response


async def _form(request: Request) -> FormData:
    """The form, with no file and bounded fields (the body is bounded already)."""
    return await request.form(max_files=0, max_fields=MAX_FIELDS, max_part_size=MAX_FIELD_BYTES)


def _one(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def _time(text: str, what: str) -> Any:
    return timefmt.parse_time(text, what) if text.strip() else None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _same_origin(request: Request, public: str | None) -> bool:
    """A browser says where a request comes from; anything but this console is refused.
    Its origin is the public one behind a proxy (`public`), else the request's own."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser's cross-site form (those send Origin): CSRF decides
    own = public or f"{request.url.scheme}://{request.headers.get('host', '')}"
    return origin == own
