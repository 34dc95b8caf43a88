#!/bin/sh
# Written by Lathe: the run is described in launch.json; its monitor holds it.
# srun inside the run passes the run's environment on (the job itself had none).
export SLURM_EXPORT_ENV=ALL
exec '/opt/la the/'\''lathe'\'' $(id)' __monitor '/shared/it'\''s a $(dir) `x` %j/alice/r-7f3a/2/launch.json' -
