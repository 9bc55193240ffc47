"""The start hook: a command a tool runs itself right before its workload, after its set-up.

A job file holding COMMAND (fio: exec_prerun) lets the run engine launch the tool ahead of
the release and hold it there: the tool's exec, job parsing and file layout happen before
the release instead of after it. The run engine puts the hook's script in VARIABLE; without
it (a job file run by hand) the hook does nothing.
"""

VARIABLE = "STORBENCH_START"
COMMAND = f'eval "${VARIABLE}"'  # no braces: fio expands ${NAME} in job files itself
