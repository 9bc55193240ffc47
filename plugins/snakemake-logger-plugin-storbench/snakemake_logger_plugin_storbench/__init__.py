"""`snakemake --logger storbench`: a progress line per run started or finished, beside
Snakemake's own output (which it leaves as it is). The work is done by
storbench.run.live_progress; this module only adapts Snakemake's log records to it.
When Snakemake cannot read a --configfile, it adds the file and line Snakemake's message
leaves out (storbench.config.source.configfile_problems)."""

import logging
import sys
from logging import LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import logger

        from storbench.run.live_progress import LiveProgress

        # through Snakemake's handler, so a line never lands inside one of its own
        self.progress = None if self.common_settings.dryrun else LiveProgress(logger.info)

    def emit(self, record: LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.name_unreadable_configfiles(record)
        if self.progress is None:
            return
        try:
            event = getattr(record, "event", None)
            if event == LogEvent.JOB_INFO:
                wildcards = dict(getattr(record, "wildcards", None) or {})
                self.progress.job_started(record.jobid, record.rule_name, wildcards)
            elif event == LogEvent.JOB_FINISHED:
                self.progress.job_finished(record.job_id)
        except Exception:  # a progress line must never stop a campaign
            self.handleError(record)

    def name_unreadable_configfiles(self, record: LogRecord) -> None:
        from snakemake.logging import logger

        # only when it failed so: every other start keeps the plugin's imports light
        from storbench.config.source import SNAKEMAKE_CONFIGFILE_ERROR, configfile_problems

        try:
            if SNAKEMAKE_CONFIGFILE_ERROR not in record.getMessage():
                return
            for problem in configfile_problems(sys.argv[1:]):
                logger.error(f"storbench: {problem}")
        except Exception:  # the error Snakemake prints must still be printed
            self.handleError(record)

    # Snakemake's own stream handler stays: this one only adds lines
    @property
    def writes_to_stream(self) -> bool:
        return False

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
