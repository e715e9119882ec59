# Sourced by every script that runs Node: the project's Node (scripts/node.sh)
# first on PATH, and its headers for native addons built at install.
# Usage: source scripts/node-env.sh
bot_agent_node=$(bash "$(dirname "${BASH_SOURCE[0]}")/node.sh")
export PATH="$bot_agent_node/bin:$PATH"
export npm_config_nodedir="$bot_agent_node"
unset bot_agent_node
