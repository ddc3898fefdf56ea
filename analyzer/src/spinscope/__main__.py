from spinscope.cli import main

raise SystemExit(main())
