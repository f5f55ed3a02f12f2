"""create_app(): the app's services object, routers, static files, protection, and the lifespan
that starts the scheduler with every prompt source's jobs."""

from __future__ import annotations

import asyncio
import gc
import logging
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from sqlmodel import Session

from app import pages
from app.backgrounds.api import router as backgrounds_api
from app.characters.api import router as characters_api
from app.chats.api import router as chats_api
from app.chats.service import finish_interrupted_replies
from app.connections.api import router as connections_api
from app.connections.crypto import KeyBox, check_key_file
from app.connections.providers._http import close_clients
from app.connections.service import seal_plain_headers
from app.game.api import router as game_api
from app.generation.reply import Generations
from app.images.routes import router as images_routes
from app.lore.api import chat_router as chat_lore_api
from app.lore.api import router as lore_api
from app.lore.prompting import CompiledBooks
from app.memory.chat_notes.api import router as chat_notes_api
from app.memory.days.runs import DayBackfills
from app.memory.recall.api import router as memory_api
from app.memory.recall.runtime import RecallRuntime
from app.memory.scenes.rescans import RescanStatuses
from app.memory.scenes.web.api import fix_router as scenes_fix_api
from app.memory.scenes.web.api import router as scenes_api
from app.memory.scenes.web.prepare import router as scenes_prepare_api
from app.memory.scenes.writer import HeldScenes
from app.memory.summaries.api import router as summaries_api
from app.memory.summaries.api import templates_router as summary_templates_api
from app.memory.summaries.prompting import SummaryBlocks
from app.personas.api import router as personas_api
from app.platform.claims import REPLIES, ClaimTable, RunClaims
from app.platform.clock import Clock
from app.platform.db import check_data_folder, make_engine
from app.platform.foreground import Foreground
from app.platform.jobs import look_after_dead_servers, settle_runs
from app.platform.migrate import upgrade_database
from app.platform.queue import make_queue
from app.platform.services import Services
from app.platform.settings import Settings, load_settings
from app.prompt.sources import PromptSources
from app.sources import default_sources
from app.tools.builtin import builtin_tools
from app.tools.mcp.api import router as mcp_api
from app.tools.memories.api import router as tool_memories_api
from app.tools.permissions.api import router as tool_settings_api
from app.tools.registry import ToolRegistry
from app.tools.tasks.api import router as tasks_api
from app.tools.web.api import router as web_search_api
from app.web.api_common import ids_in_range, install_error_handlers
from app.web.auth import ProtectionMiddleware, SessionSigner, allowed_host_names
from app.web.bodylimit import BodyLimit
from app.web.headers import SecurityHeaders, content_security_policy, inline_script_hashes
from app.web.templates import STATIC_DIR, TEMPLATES_DIR
from app.web.throttle import LoginThrottle

log = logging.getLogger(__name__)
SWAGGER_UI = "swagger-ui-5.35.0"


def build_services(settings: Settings, *, sources: PromptSources | None = None) -> Services:
    """Everything the app keeps while it runs, for one data folder; the database is migrated first
    (a request must never meet an old schema)."""
    check_data_folder(settings.data_dir, settings.database_path.name)  # made owner-only when new
    # The data folder stays in use with PostgreSQL: it keeps the keys and the images.
    engine = make_engine(settings.database_url or settings.database_path)
    upgrade_database(engine)
    keybox = KeyBox(settings.secret_key_path)
    check_key_file(engine, keybox, settings.secret_key_path, shared=settings.database_url is not None)
    # The claims read and write on connections of their own: a request holding one of the app's
    # connections (a page asking whether a reply or a run is at work) never waits for a second from the
    # same pool, which a hundred such requests at once emptied, each waiting for the others (the load
    # bench saw its 30 s timeout). Claim statements are short and never wait for each other's pool.
    claims_engine = make_engine(settings.database_url or settings.database_path, pool_size=2, max_overflow=10)
    claims = RunClaims(ClaimTable(claims_engine, server=settings.server))
    if dropped := claims.table.forget_previous_life():
        log.info("Dropped %d run claim(s) this server's last start left.", dropped)
    with Session(engine) as session:
        # After the claims of this server's last life are dropped: a reply another server writes now keeps its live claim.
        if finished := finish_interrupted_replies(session, writing=lambda: claims.table.chats(REPLIES)):
            log.warning("Marked %d reply(s) cut off by the last shutdown as incomplete.", finished)
        seal_plain_headers(session, keybox)
        session.commit()
    signer = (
        SessionSigner(engine, settings.password, carried_over=settings.session_key_path)
        if settings.password
        else None
    )
    return Services(
        settings=settings,
        engine=engine,
        keybox=keybox,
        lorebooks=CompiledBooks(),
        summary_blocks=SummaryBlocks(),
        recall=RecallRuntime(engine=engine),
        sources=sources if sources is not None else default_sources(),
        generations=Generations(claims.table, engine),
        foreground=Foreground(),
        claims=claims,
        day_backfills=DayBackfills(),
        rescan_statuses=RescanStatuses(),
        held_scenes=HeldScenes(claims.table),
        tools=ToolRegistry(builtin_tools()),
        clock=Clock(),
        session_signer=signer,
        login_throttle=LoginThrottle(engine) if settings.password else None,
    )


def create_app(settings: Settings | None = None, *, sources: PromptSources | None = None) -> FastAPI:
    services = build_services(settings or load_settings(), sources=sources)
    settings = services.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Everything loaded so far (modules, the app) lives as long as the process: frozen, it is left
        # out of CPython's full collections, which pause every thread, the event loop's too, for as
        # long as they take to walk it (whole seconds were seen while a 20,000-message import and its
        # memories were built). Collected first, so no garbage is frozen with it.
        gc.collect()
        gc.freeze()
        # Every run the last shutdown cut short is resumed or closed before anything else runs (app/platform/jobs.py):
        # the scheduler's first sweeps then find the resumed runs holding their chats, and no request ever
        # sees a run "running" with nobody at work.
        settle_runs(services)
        services.claims.table.start_heartbeat()
        # With several servers (PostgreSQL) one that dies leaves replies and runs no start of its own
        # may come back for: every server looks for them now and then. On SQLite one process owns the
        # file, and the start above settled everything.
        looking = (
            asyncio.get_running_loop().create_task(look_after_dead_servers(services))
            if services.engine.dialect.name == "postgresql"
            else None
        )
        services.recall.load_models(services.engine)
        if settings.start_scheduler:
            # On PostgreSQL this server's worker of the shared job queue starts too (app/platform/queue.py).
            services.queue = queue = make_queue(settings, services.sources.jobs())
            queue.start(services)  # on the event loop: the in-process scheduler runs on it
            # Set once it runs: a run's thread reads "a scheduler that is not running" as the app shut down.
            services.scheduler = queue.scheduler
        try:
            yield
        finally:
            services.claims.table.keep_runs_for_others()
            if looking is not None:
                looking.cancel()
            await services.generations.shutdown()
            services.claims.table.stop_heartbeat()
            await close_clients()
            if services.queue is not None:
                services.queue.stop()
            services.close()

    # /docs is served from vendored Swagger UI files: the stock page loads them from a CDN, which
    # people running Sugo offline cannot reach.
    app = FastAPI(
        title="Sugo",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="Self-hosted AI roleplay and chat with memory that works.",
    )
    app.state.services = services
    app.add_middleware(
        ProtectionMiddleware,
        password=settings.password,
        signer=services.session_signer,
        allowed_hosts=allowed_host_names(settings.allowed_hosts),
        throttle=services.login_throttle,
    )
    app.add_middleware(
        BodyLimit
    )  # before the routes and the password check: nothing reads a body past the limit
    # Outermost, so refusals (413, 400, 403) carry the headers too; base.html's theme bootstrap is hashed from its text.
    app.add_middleware(SecurityHeaders, templates=[(TEMPLATES_DIR / "base.html").read_text()])
    install_error_handlers(app)

    # scenes_prepare_api and scenes_fix_api before scenes_api: their /scenes/prepare, /scenes/problems would
    # otherwise be read as /scenes/{scene_id}.
    for router in (
        connections_api,
        characters_api,
        personas_api,
        backgrounds_api,
        chats_api,
        game_api,
        memory_api,
        scenes_prepare_api,
        scenes_fix_api,
        scenes_api,
        summaries_api,
        summary_templates_api,
        chat_notes_api,
        lore_api,
        chat_lore_api,
        tool_settings_api,
        tool_memories_api,
        images_routes,
        web_search_api,
        tasks_api,
        mcp_api,
        *pages.routers,
    ):
        app.include_router(router, dependencies=[Depends(ids_in_range)])
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url,
            title="Sugo API",
            swagger_js_url=f"/static/{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"/static/{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
            # Tags folded: with every operation listed open (Swagger UI's default), its rendering of ~170
            # operations stopped after the first tags here; folded, every tag shows and opens on a click.
            swagger_ui_parameters={"docExpansion": "none"},
        )
        # Its own policy: the page starts Swagger UI with an inline script.
        page.headers["Content-Security-Policy"] = content_security_policy(
            inline_script_hashes(page.body.decode()), docs=True
        )
        return page

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict:
        """Liveness ("status" is "ok" while Sugo answers), and whether the built-in embedding models the
        data uses are loaded ("embedder": "loading", "ready" or "failed"; "models" names them)."""
        models = services.recall.models
        return {"status": "ok", "embedder": models.state(), "models": models.states()}

    return app
