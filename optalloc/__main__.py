from optalloc.cli import main

raise SystemExit(main())
