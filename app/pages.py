"""The HTML routers, in the order they are matched."""

from app.backgrounds.routes import router as backgrounds
from app.characters.routes import router as characters
from app.chats.routes import router as chats
from app.connections.routes import router as connections
from app.game.routes import router as game
from app.lore.routes import router as lorebooks
from app.memory.chat_notes.routes import router as chat_notes
from app.memory.recall.routes import router as memories
from app.memory.scenes.web.pages import router as scene_pages
from app.memory.scenes.web.routes import router as scene_prepare
from app.memory.summaries.routes import router as summaries
from app.personas.routes import router as personas
from app.presets.routes import router as presets
from app.tools.mcp.routes import router as mcp_servers
from app.tools.memories.routes import router as tool_memories
from app.tools.permissions.routes import router as tool_settings
from app.tools.tasks.routes import router as tasks
from app.tools.web.routes import router as web_search_settings
from app.web.install import router as install
from app.web.login import router as home

# Prepare's pages before any /chats/{id}/scenes/{scene_id} page: /scenes/prepare is not a scene id.
routers = (
    home,
    install,
    scene_prepare,
    scene_pages,
    memories,
    chat_notes,
    summaries,
    chats,
    backgrounds,
    game,
    characters,
    personas,
    presets,
    connections,
    lorebooks,
    tool_settings,
    web_search_settings,
    tasks,
    mcp_servers,
    tool_memories,
)
