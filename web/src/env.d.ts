// The bundle's catalog, made by build.mjs from data/messages_ui.yaml: {id: {en, zh}}.
declare module "lathe:catalog" {
  const catalog: Record<string, { en: string; zh: string }>;
  export default catalog;
}
