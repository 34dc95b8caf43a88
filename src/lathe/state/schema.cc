// The SQL of every version of lathe.db, in order: tables are added by the
// store that owns them (run_store.h, credential_store.h, ...), but the schema is
// one, versioned as one (PRAGMA user_version), so that a home moves forward
// in a single step whichever store opens it first.
#include "lathe/state/schema.h"

namespace lathe::state {

const std::vector<std::string>& SchemaMigrations() {
  static const std::vector<std::string> m = {
      // v1: runs and their events.
      R"sql(
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  seq INTEGER NOT NULL UNIQUE,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT 'job',
  spec TEXT NOT NULL,
  state TEXT NOT NULL,
  gpus TEXT NOT NULL DEFAULT '[]',
  attempt INTEGER NOT NULL DEFAULT 0,
  retries_used INTEGER NOT NULL DEFAULT 0,
  preemptions INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL DEFAULT 0,
  finished_at INTEGER NOT NULL DEFAULT 0,
  exit_code INTEGER,
  signal INTEGER,
  oom_killed INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '',
  stop_intent TEXT NOT NULL DEFAULT '',
  monitor_pid INTEGER NOT NULL DEFAULT 0,
  monitor_start INTEGER NOT NULL DEFAULT 0,
  child_pid INTEGER NOT NULL DEFAULT 0,
  run_dir TEXT NOT NULL,
  cgroup_dirs TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX runs_state ON runs(state);
CREATE INDEX runs_name ON runs(name, seq);
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  ts INTEGER NOT NULL,
  type TEXT NOT NULL,
  message TEXT NOT NULL,
  data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_run ON events(run_id, id);
)sql",
      // v2: idempotency keys of submissions (one row per uid and key).
      R"sql(
CREATE TABLE idempotency_keys (
  uid INTEGER NOT NULL,
  key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (uid, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
)sql",
      // v3: how an attempt is executed is its backend's (exec/backend.h): the
      // local process fields become the local backend's handle.
      R"sql(
ALTER TABLE runs ADD COLUMN backend TEXT NOT NULL DEFAULT 'local';
ALTER TABLE runs ADD COLUMN handle TEXT NOT NULL DEFAULT '{}';
UPDATE runs SET handle = json_object('cgroup_dirs', json(cgroup_dirs))
  WHERE monitor_pid = 0;
UPDATE runs SET handle = json_object('cgroup_dirs', json(cgroup_dirs), 'monitor_pid', monitor_pid,
                                     'monitor_start', monitor_start, 'child_pid', child_pid)
  WHERE monitor_pid != 0;
ALTER TABLE runs DROP COLUMN monitor_pid;
ALTER TABLE runs DROP COLUMN monitor_start;
ALTER TABLE runs DROP COLUMN child_pid;
ALTER TABLE runs DROP COLUMN cgroup_dirs;
)sql",
      // v4: per-user API tokens: only the secret's SHA-256 (into credentials
      // in v12).
      R"sql(
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  secret_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  last_used_at INTEGER NOT NULL DEFAULT 0,
  created_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX api_tokens_uid ON api_tokens(uid, created_at);
)sql",
      // v5: per-user secrets (secret_store.h): AES-256-GCM sealed, hex.
      R"sql(
CREATE TABLE secrets (
  uid INTEGER NOT NULL,
  name TEXT NOT NULL,
  sealed TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (uid, name)
);
)sql",
      // v6: browser sessions: only the secret's SHA-256 (into credentials in
      // v12); the daemon's key for their CSRF tokens (credential_store.h).
      R"sql(
CREATE TABLE browser_sessions (
  id TEXT PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  scope TEXT NOT NULL,
  secret_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL,
  created_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX browser_sessions_uid ON browser_sessions(uid, created_at);
CREATE TABLE session_keys (
  name TEXT PRIMARY KEY,
  key TEXT NOT NULL
);
  )sql",
      // v7: the GPUs each attempt held and when (quotas and fair share,
      // daemon/quotas.h). Not tied to runs: removing a run keeps its usage.
      // Filled with the latest attempt of every run that held GPUs.
      R"sql(
CREATE TABLE gpu_attempts (
  run_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, attempt)
);
CREATE INDEX gpu_attempts_ended ON gpu_attempts(ended_at);
INSERT INTO gpu_attempts (run_id, attempt, uid, user, gpus, started_at, ended_at)
  SELECT id, attempt, uid, user, CAST(json_extract(spec, '$.gpus') AS INTEGER), started_at,
         CASE WHEN state IN ('starting', 'running', 'stopping') THEN 0
              ELSE max(finished_at, started_at) END
  FROM runs WHERE attempt > 0 AND started_at > 0 AND json_extract(spec, '$.gpus') > 0;
)sql",
      // v8: deployment keys: only the secret's SHA-256, bound to a
      // deployment's name and its owner (into credentials in v12).
      R"sql(
CREATE TABLE deploy_keys (
  id TEXT PRIMARY KEY,
  deployment TEXT NOT NULL,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  secret_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  last_used_at INTEGER NOT NULL DEFAULT 0,
  created_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX deploy_keys_deployment ON deploy_keys(deployment, created_at);
)sql",
      // v9: what a run's workspace checked out (RunRecord::workspace).
      R"sql(
ALTER TABLE runs ADD COLUMN workspace TEXT NOT NULL DEFAULT '{}';
)sql",
      // v10: the model registry (model_store.h): models, their immutable
      // versions (each a snapshot of the store, pinned there) and aliases.
      R"sql(
CREATE TABLE models (
  name TEXT PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  public INTEGER NOT NULL DEFAULT 0,
  next_version INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
);
CREATE TABLE model_versions (
  model TEXT NOT NULL REFERENCES models(name) ON DELETE CASCADE,
  version INTEGER NOT NULL,
  snapshot TEXT NOT NULL,
  backend TEXT NOT NULL,
  file TEXT NOT NULL DEFAULT '',
  handler TEXT NOT NULL DEFAULT '',
  file_pattern TEXT NOT NULL DEFAULT '',
  inputs TEXT NOT NULL DEFAULT 'null',
  outputs TEXT NOT NULL DEFAULT 'null',
  lineage TEXT NOT NULL DEFAULT '{}',
  note TEXT NOT NULL DEFAULT '',
  created_by TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  PRIMARY KEY (model, version)
);
CREATE INDEX model_versions_snapshot ON model_versions(snapshot);
CREATE TABLE model_aliases (
  model TEXT NOT NULL,
  alias TEXT NOT NULL,
  version INTEGER NOT NULL,
  PRIMARY KEY (model, alias),
  FOREIGN KEY (model, version) REFERENCES model_versions(model, version) ON DELETE RESTRICT
);
)sql",
      // v11: deployments (deployment_store.h) and their events; the
      // replicas are runs of kind service, found by their spec's deployment.
      R"sql(
CREATE TABLE deployments (
  name TEXT PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  spec TEXT NOT NULL,
  version TEXT NOT NULL DEFAULT '',
  plan TEXT NOT NULL DEFAULT '{}',
  health TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  removing INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE deployment_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  deployment TEXT NOT NULL,
  ts INTEGER NOT NULL,
  level TEXT NOT NULL,
  msg_id TEXT NOT NULL DEFAULT '',
  args TEXT NOT NULL DEFAULT '{}',
  message TEXT NOT NULL
);
CREATE INDEX deployment_events_by_name ON deployment_events(deployment, id);
CREATE INDEX runs_by_deployment ON runs(json_extract(spec, '$.deployment.name'))
  WHERE kind = 'service';
)sql",
      // v12: every hashed credential in one table (credential_store.h), told
      // apart by kind: the API tokens of v4, the browser sessions of v6 (their
      // scope in scope) and the deployment keys of v8 (their deployment in
      // scope) move into it, row for row, and their tables go.
      R"sql(
CREATE TABLE credentials (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('token', 'session', 'deploy_key')),
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  scope TEXT NOT NULL DEFAULT '',
  secret_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  last_used_at INTEGER NOT NULL DEFAULT 0,
  created_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX credentials_uid ON credentials(kind, uid, created_at);
CREATE INDEX credentials_scope ON credentials(kind, scope, created_at);
INSERT INTO credentials (id, kind, uid, user, name, scope, secret_hash, created_at, expires_at,
                         last_used_at, created_by)
  SELECT id, 'token', uid, user, name, '', secret_hash, created_at, expires_at, last_used_at,
         created_by FROM api_tokens;
INSERT INTO credentials (id, kind, uid, user, name, scope, secret_hash, created_at, expires_at,
                         last_used_at, created_by)
  SELECT id, 'session', uid, user, '', scope, secret_hash, created_at, expires_at, last_used_at,
         created_by FROM browser_sessions;
INSERT INTO credentials (id, kind, uid, user, name, scope, secret_hash, created_at, expires_at,
                         last_used_at, created_by)
  SELECT id, 'deploy_key', uid, user, name, deployment, secret_hash, created_at, expires_at,
         last_used_at, created_by FROM deploy_keys;
DROP TABLE api_tokens;
DROP TABLE browser_sessions;
DROP TABLE deploy_keys;
)sql",
      // v13: a pool run continued as a chain of jobs across its partition's
      // time limit (RunRecord::chain_started_at_ms).
      R"sql(
ALTER TABLE runs ADD COLUMN chain_started_at INTEGER NOT NULL DEFAULT 0;
)sql",
      // v14: container images (image_store.h): each user's names for images
      // in the shared store, and the ids each user may run.
      R"sql(
CREATE TABLE images (
  uid INTEGER NOT NULL,
  name TEXT NOT NULL,
  id TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  PRIMARY KEY (uid, name)
);
CREATE INDEX images_id ON images(id);
CREATE TABLE image_grants (
  uid INTEGER NOT NULL,
  id TEXT NOT NULL,
  granted_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (uid, id)
);
)sql",
      // v15: sharing (share_store.h): grants of a run, a deployment or a
      // model to a user or a group with a role, and projects with members.
      R"sql(
CREATE TABLE shares (
  kind TEXT NOT NULL,
  object TEXT NOT NULL,
  grantee_kind TEXT NOT NULL,
  grantee TEXT NOT NULL,
  role TEXT NOT NULL,
  owner_uid INTEGER NOT NULL,
  granted_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (kind, object, grantee_kind, grantee)
);
CREATE INDEX shares_grantee ON shares(grantee_kind, grantee);
CREATE TABLE projects (
  name TEXT PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE project_members (
  project TEXT NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  role TEXT NOT NULL,
  added_at INTEGER NOT NULL,
  PRIMARY KEY (project, uid)
);
CREATE INDEX project_members_uid ON project_members(uid);
)sql",
      // v16: each GPU attempt's project (its run's spec.project, "" for none)
      // in the ledger itself, so that a removed run's GPU-hours keep counting
      // toward its project. Filled from the runs still there.
      R"sql(
ALTER TABLE gpu_attempts ADD COLUMN project TEXT NOT NULL DEFAULT '';
UPDATE gpu_attempts SET project = COALESCE(
  (SELECT json_extract(spec, '$.project') FROM runs WHERE runs.id = gpu_attempts.run_id), '');
)sql",
  };
  return m;
}

Result<std::unique_ptr<Db>> OpenLatheDb(const std::string& db_path) {
  return Db::Open(db_path, SchemaMigrations());
}

}  // namespace lathe::state
