"""`python -m assay` runs the assay command."""

from assay.cli import main

raise SystemExit(main())
