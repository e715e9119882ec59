"""Last, since it ends the bot: a restart from inside is answered before it happens."""

from bot_agent import BotAgentClient


def test_restart_is_answered_before_the_bot_restarts(client: BotAgentClient) -> None:
    assert client.restart() == f"Bot {client.bot_id} is restarting"
