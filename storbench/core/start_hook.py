"""The start hook: a command a tool runs itself right before its workload, after its set-up.

A job file holding COMMAND (fio: exec_prerun) lets the run engine launch the tool ahead of
the release and hold it there: the tool's exec, job parsing and file layout happen before
the release instead of after it. Standalone, the run engine puts the hook's script in
VARIABLE; without it (a job file run by hand) the hook does nothing.
"""

VARIABLE = "STORBENCH_START"
COMMAND = f'eval "${VARIABLE}"'  # no braces: fio expands ${NAME} in job files itself
# Service mode: the services were started before the run, so the hook is a script the run
# leaves in the service's folder (its working folder), and the run writes the release time
# into its own copy of the job at launch, in place of RELEASE.
SCRIPT_NAME = "storbench-start.sh"
RELEASE = "@storbench-release@"
SERVICE_COMMAND = f"sh {SCRIPT_NAME} {RELEASE}"
