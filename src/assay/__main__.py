"""`python -m assay` runs the assay command."""

from assay.cli.main import main

raise SystemExit(main())
