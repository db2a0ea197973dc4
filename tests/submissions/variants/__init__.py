"""Per chapter: ``VARIANTS`` (alternative correct answers), ``SCRATCH`` and ``SELF_CHECK`` (the
habit cells of ``build.with_habits``)."""
