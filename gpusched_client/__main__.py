from gpusched_client.cli import main

raise SystemExit(main())
