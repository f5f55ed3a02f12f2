"""create_app(): routers, static files, protection, and the lifespan that migrates the database
and starts the scheduler."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from sqlmodel import Session

from app.api_common import install_error_handlers
from app.auth import ProtectionMiddleware, SessionSigner, load_session_secret
from app.chats.generate import Generations
from app.chats.service import finish_interrupted_replies
from app.connections.crypto import KeyBox, register_keybox
from app.connections.providers._http import close_clients
from app.db import make_engine
from app.jobs import make_scheduler
from app.memory.recall import jobs as recall_jobs
from app.migrate import upgrade_database
from app.settings import Settings, load_settings
from app.web import STATIC_DIR

log = logging.getLogger(__name__)
SWAGGER_UI = "swagger-ui-5.35.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.database_path)
    # Migrate before serving anything: a request must never meet an old schema.
    upgrade_database(engine)
    with Session(engine) as session:
        if finished := finish_interrupted_replies(session):
            log.warning("Marked %d reply(s) cut off by the last shutdown as incomplete.", finished)
        session.commit()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        scheduler = make_scheduler()
        if settings.start_scheduler:
            scheduler.start()
            recall_jobs.register(scheduler, engine)
        app.state.scheduler = scheduler
        try:
            yield
        finally:
            await app.state.generations.shutdown()
            await close_clients()
            if scheduler.running:
                scheduler.shutdown(wait=False)
            engine.dispose()

    # /docs is served from vendored Swagger UI files: the stock page loads them from a CDN, which
    # people running Sugo offline cannot reach.
    app = FastAPI(title="Sugo", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Self-hosted AI roleplay and chat with memory that works.")  # fmt: skip
    app.state.settings = settings
    app.state.engine = engine
    app.state.keybox = KeyBox(settings.secret_key_path)
    register_keybox(str(engine.url), app.state.keybox)
    app.state.generations = Generations()

    signer = SessionSigner(load_session_secret(settings.session_key_path)) if settings.password else None
    app.state.session_signer = signer
    app.add_middleware(ProtectionMiddleware, password=settings.password, signer=signer)
    install_error_handlers(app)

    from app import pages
    from app.characters.api import router as characters_api
    from app.chats.api import router as chats_api
    from app.connections.api import router as connections_api
    from app.images.routes import router as images_routes
    from app.lore.api import chat_router as chat_lore_api
    from app.lore.api import router as lore_api
    from app.memory.recall.api import router as memory_api
    from app.personas.api import router as personas_api

    for router in (connections_api, characters_api, personas_api, chats_api, memory_api, lore_api, chat_lore_api,
                   images_routes, *pages.routers):  # fmt: skip
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url, title="Sugo API",
            swagger_js_url=f"/static/{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"/static/{SWAGGER_UI}/swagger-ui.css", swagger_favicon_url="/static/favicon.svg",
        )  # fmt: skip

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict:
        return {"status": "ok"}

    return app
