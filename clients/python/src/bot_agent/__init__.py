"""bot-agent's client for bots written in Python: restart, stop and start yourself, read your logs,
stats, status, exit records, and follow your logs and events, as the bot named by BOT_ID.

The synchronous :class:`BotAgentClient` needs the standard library only; the asyncio
:class:`bot_agent.aio.AsyncBotAgentClient` needs httpx (``pip install bot-agent-client[async]``).
Every failure is a :class:`BotAgentError` carrying the agent's ``msg`` and HTTP ``status``.
"""

from ._common import BotAgentError, BotEvent, BotStats, BotStatus, ExitRecord, LogLine, Revision
from .client import BotAgentClient, Heartbeat, PlatformClient, find_agent

__all__ = ["BotAgentClient", "BotAgentError", "Heartbeat", "PlatformClient", "BotEvent", "BotStats", "BotStatus", "ExitRecord", "LogLine", "Revision", "find_agent"]
__version__ = "0.1.0"
