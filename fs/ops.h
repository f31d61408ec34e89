/*
 * ops.h - the FUSE handlers that ops.c's table (tfsd_ops) takes from the other files of
 * fs/: those of a writable mount, and the extended attributes.
 */
#ifndef TFSD_OPS_H
#define TFSD_OPS_H

#include "fs.h"

/* write.c */
void tfsd_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		     struct fuse_file_info *fi);
void tfsd_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi);
/* commit.c */
void tfsd_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfsd_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
/* namespace.c */
void tfsd_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		    struct fuse_file_info *fi);
void tfsd_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfsd_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		    const char *newname, unsigned int flags);
/* xattr.c */
void tfsd_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void tfsd_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void tfsd_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		      size_t size, int flags);

#endif
