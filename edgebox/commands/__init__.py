"""commands/ holds ``edgebox``'s subcommands, one module per family (serve,
check, publish and build-engine, passwd): each adds its arguments to the
parser ``cli.build_parser`` builds and runs from the parsed arguments,
returning an exit status (``console``).

Invariant: only ``serve`` starts the daemon; every other command binds no
port, loads no model into a server and contacts no broker. Settings are read
once per command, from the layers ``settings.load_settings`` stacks, and
passed down; nothing here is parsed at import time.
"""
