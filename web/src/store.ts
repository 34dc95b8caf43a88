// A value that components can watch: the one bit of shared state the UI has
// (language, theme, session). Set replaces the value and re-renders watchers.
import { useEffect, useState } from "preact/hooks";

export interface Store<T> {
  get(): T;
  set(value: T): void;
  subscribe(fn: () => void): () => void;
}

export function createStore<T>(initial: T): Store<T> {
  let value = initial;
  const watchers = new Set<() => void>();
  return {
    get: () => value,
    set(v: T) {
      value = v;
      watchers.forEach((fn) => fn());
    },
    subscribe(fn) {
      watchers.add(fn);
      return () => watchers.delete(fn);
    },
  };
}

// The store's value; the component re-renders when it changes — also when it
// changed between the render and the effect that subscribes (an answer that
// came quickly), which a plain subscribe would miss.
export function useStore<T>(store: Store<T>): T {
  const value = store.get();
  const [, tick] = useState(0);
  useEffect(() => {
    const unsubscribe = store.subscribe(() => tick((n) => n + 1));
    if (store.get() !== value) tick((n) => n + 1);
    return unsubscribe;
  }, [store]);
  return value;
}
