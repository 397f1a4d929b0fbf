"""`python -m assay` runs the assay command."""

from assay.cli.main import main
from assay.tasks.runtime_guard import exit_nonzero_after_late_refusals

exit_nonzero_after_late_refusals()
raise SystemExit(main())
