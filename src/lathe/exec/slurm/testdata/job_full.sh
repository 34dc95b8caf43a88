#!/bin/sh
# Written by Lathe: the run is described in launch.json; its monitor holds it.
# srun inside the run passes the run's environment on (the job itself had none).
export SLURM_EXPORT_ENV=ALL
exec '/opt/lathe/bin/lathe' __monitor '/shared/lathe/alice/r-7f3a/2/launch.json' -
