from edgebox.cli import main

raise SystemExit(main())
