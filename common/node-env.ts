/** The values NODE_ENV takes (common/config validates it). */
export type NodeEnv = 'development' | 'test' | 'production';

/**
 * Whether the production guards are off: for NODE_ENV=development only. Every other NODE_ENV (test, production) keeps
 * them, so a value that merely is not `production` switches no guard off. No imports: every module may ask.
 */
export const isDevelopment = (config: { NODE_ENV?: NodeEnv }): boolean => config.NODE_ENV === 'development';
