from spinscope.commands.cli import main

raise SystemExit(main())
