"""commands/ holds ``edgebox``'s subcommands, one module per family (serve,
check, publish and build-engine, passwd, rollout): each adds its arguments to the
parser ``cli.build_parser`` builds and runs from the parsed arguments,
returning an exit status (``console``).

Invariant: only ``serve`` starts the daemon; every other command binds no
port, loads no model into a server and contacts no broker. ``rollout`` is the
one that talks to a daemon, and only through its HTTP API, under the access
rules any client meets. Settings are read
once per command, from the layers ``settings.load_settings`` stacks, and
passed down; nothing here is parsed at import time.
"""
