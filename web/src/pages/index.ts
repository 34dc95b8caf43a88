// The UI's pages, in the order of the navigation. A path is matched in this
// order, so a more specific one ("/runs/:id") may come after its list ("/runs").
import type { Page } from "../page";
import overview from "./overview";
import runs from "./runs";
import run from "./run";
import snapshots from "./snapshots";
import models from "./models";
import deployments from "./deployments";
import notebooks from "./notebooks";
import access from "./access";

export const pages: Page[] = [overview, runs, run, snapshots, models, deployments, notebooks, access];
