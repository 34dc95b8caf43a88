BEGIN TRANSACTION;
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
INSERT INTO "api_tokens" VALUES('tbwh1f0j0t3',0,'root','laptop','40bd443511690cb6e13c4f7b7fa46c1f1061f15f2af6505b0365ad68cb5acdc7',1796562570706,2111922570706,1796562570807,'socket');
INSERT INTO "api_tokens" VALUES('tpmyywm2vf6',0,'root','ci','9273c1d39e530dba98c331bc1a4fec0a6cfab3232d4f01be6190d650906cbf43',1796562570746,0,0,'socket');
INSERT INTO "api_tokens" VALUES('trbwv278kb9',0,'root','spare','217e80e8a4941dc7c3fbdcf70b203670625e0f1c7ca4bc09e028a686a8c8c157',1796562570768,1796562571768,0,'socket');
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
INSERT INTO "browser_sessions" VALUES('sc5p5bgjcgq',0,'root','ui','f738eed6a494f2213f2280d12e7b4c46f2fe74fd9ce493756e3d2b03ccd13088',1796562570803,1797167370803,1796562570803,'socket');
INSERT INTO "browser_sessions" VALUES('spb0neya3yz',0,'root','ui','3318c9c0abe9ef9297d8b13eb31dc76f786ea93f3f972a6f60c3e2cd8e4da3f3',1796562570809,1797167370809,1796562570809,'token tbwh1f0j0t3');
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
INSERT INTO "deploy_keys" VALUES('kafr53tz6jj','web',0,'root','ci','a9a8dddd91ab17136db994be03912c1d093dd5d14a32441d22a3f3c7f162dc9c',1796562570952,0,0,'socket');
INSERT INTO "deploy_keys" VALUES('kjdkhz5sayq','web',0,'root','spare','ef07732dbfdc27392152f07ea03aa97b356a9049618adba53ddf0b950a099faa',1796562570984,2111922570984,0,'socket');
CREATE TABLE deployment_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  deployment TEXT NOT NULL,
  ts INTEGER NOT NULL,
  level TEXT NOT NULL,
  msg_id TEXT NOT NULL DEFAULT '',
  args TEXT NOT NULL DEFAULT '{}',
  message TEXT NOT NULL
);
INSERT INTO "deployment_events" VALUES(1,'web',1796562570880,'info','deploy.created','{"model":"/bin/sleep 1000000","name":"web","user":"root","version":"rev-1"}','deployment web of /bin/sleep 1000000 (rev-1) created by root');
INSERT INTO "deployment_events" VALUES(2,'web',1796562570992,'info','deploy.starting','{"count":"1","desired":"1","live":"0","version":"rev-1"}','starting 1 replica(s) of rev-1 (0 live, 1 wanted)');
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
INSERT INTO "deployments" VALUES('web',0,'root','{"command":["/bin/sleep","1000000"],"gpus":0,"name":"web","port":18457,"preemptible":true,"priority":"normal","public":false,"ready":"/","ready_timeout":"300000ms","replicas":1,"revision":1}','rev-1','{"promoted":false,"reason_args":{"desired":"1","ready":"0","version":"rev-1"},"reason_id":"deploy.health.starting","revisions":{"rev-1":{"command":["/bin/sleep","1000000"],"port":18457}},"state":{"above_since_ms":-1,"backoff":{},"below_since_ms":-1,"canary":false,"desired":1,"drained":{},"failed_reason":"","failed_versions":[],"goal_version":"rev-1","idle_since_ms":-1,"noted_ended":[],"preempted":[],"ready_seen":[],"rolling_to":"","stable_version":"","stopped":[]},"traffic":{}}','progressing','0 of 1 replica(s) of rev-1 ready; the others are starting',0,1796562570877,1796562570981);
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  ts INTEGER NOT NULL,
  type TEXT NOT NULL,
  message TEXT NOT NULL,
  data TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO "events" VALUES(1,'rp82aabqnfn',1796562570988,'state','submitted','{"to":"queued"}');
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
CREATE TABLE idempotency_keys (
  uid INTEGER NOT NULL,
  key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (uid, key)
);
CREATE TABLE model_aliases (
  model TEXT NOT NULL,
  alias TEXT NOT NULL,
  version INTEGER NOT NULL,
  PRIMARY KEY (model, alias),
  FOREIGN KEY (model, version) REFERENCES model_versions(model, version) ON DELETE RESTRICT
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
CREATE TABLE models (
  name TEXT PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  public INTEGER NOT NULL DEFAULT 0,
  next_version INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
);
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
  run_dir TEXT NOT NULL,
  backend TEXT NOT NULL DEFAULT 'local', handle TEXT NOT NULL DEFAULT '{}', workspace TEXT NOT NULL DEFAULT '{}');
INSERT INTO "runs" VALUES('rp82aabqnfn','web-4hdk7v',1,0,'root','service','{"command":["/work/wt-cred/build/lathe","__relay","--socket","/tmp/lathe-integ-0yz9r1f9/deployments/sockets/web-4hdk7v/serve.sock","--","/bin/sleep","1000000"],"deployment":{"name":"web","socket":"/tmp/lathe-integ-0yz9r1f9/deployments/sockets/web-4hdk7v/serve.sock","version":"rev-1"},"env":{"LATHE_DEPLOYMENT":"web","LATHE_DEPLOYMENT_REVISION":"rev-1"},"gpus":0,"name":"web-4hdk7v","network":"isolated","ports":[{"name":"app","port":18457}],"preemptible":true,"priority":"normal","requeue":true,"retry":0,"type":"service","umask":18}','queued','[]',0,0,0,1796562570988,0,0,NULL,NULL,0,'','','/tmp/lathe-integ-0yz9r1f9/runs/rp82aabqnfn','local','{}','{}');
CREATE TABLE secrets (
  uid INTEGER NOT NULL,
  name TEXT NOT NULL,
  sealed TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (uid, name)
);
CREATE TABLE session_keys (
  name TEXT PRIMARY KEY,
  key TEXT NOT NULL
);
INSERT INTO "session_keys" VALUES('csrf','ebdcfa4308d658f21a24eecbb3637c3faf0ff400e30132397390f8553e090589');
CREATE INDEX runs_state ON runs(state);
CREATE INDEX runs_name ON runs(name, seq);
CREATE INDEX events_run ON events(run_id, id);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
CREATE INDEX api_tokens_uid ON api_tokens(uid, created_at);
CREATE INDEX browser_sessions_uid ON browser_sessions(uid, created_at);
CREATE INDEX gpu_attempts_ended ON gpu_attempts(ended_at);
CREATE INDEX deploy_keys_deployment ON deploy_keys(deployment, created_at);
CREATE INDEX model_versions_snapshot ON model_versions(snapshot);
CREATE INDEX deployment_events_by_name ON deployment_events(deployment, id);
CREATE INDEX runs_by_deployment ON runs(json_extract(spec, '$.deployment.name'))
  WHERE kind = 'service';
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('deployment_events',2);
INSERT INTO "sqlite_sequence" VALUES('events',1);
COMMIT;
PRAGMA user_version = 11;
